import type { Logger } from "../../../logger.js";
import type { PeerClient } from "../../../peer/index.js";
import { hash32 } from "../../ring/hash.js";
import { CallMethod } from "../wire/call-methods.js";
import { isAdvertiseUrl } from "../../../config/advertise-url.js";
import type { SoftwareFacts } from "../../../peer/index.js";

/** One ring member as clients see it: its ring name and the URL clients reach it at (null until it has told us). */
export interface DirectoryMember {
  readonly id: string;
  readonly url: string | null;
}

/**
 * The client-facing view of the ring (docs/client.md): the members this node believes
 * alive, each one's advertise URL, and a ring version that changes whenever either does.
 * Clients compare the version every answer carries with the one they routed by, and fetch
 * GET /cluster again when they differ.
 *
 * The version and its header line are computed once per change, never per request.
 */
export class Directory {
  private readonly urls = new Map<string, string>();
  private ringMembers: readonly string[];
  private view: readonly DirectoryMember[] = [];
  /** 16 hex digits: a stable hash of the sorted members and their URLs */
  version = "";
  /** the build and its peer protocol versions, for GET /cluster (set by the node: src/node.ts) */
  software: (() => SoftwareFacts) | undefined = undefined;

  constructor(
    /** this node's ring name */
    public self: string,
    /** this node's advertise URL ("" until known); setRing() publishes a change */
    public selfUrl: string,
    /** the policy version a member runs, as its heartbeats tell; null until heard (not part of the ring version) */
    readonly policyVersionOf: (member: string) => string | null = () => null,
  ) {
    this.ringMembers = [self];
    this.rebuild();
  }

  get members(): readonly DirectoryMember[] {
    return this.view;
  }

  /** The ring changed (members sorted, as HashRing keeps them). */
  setRing(members: readonly string[], self: string = this.self): void {
    this.self = self;
    this.ringMembers = members;
    // URLs of members off the ring are forgotten (they tell it again when they rejoin): bounded by the ring.
    for (const member of this.urls.keys()) if (!members.includes(member)) this.urls.delete(member);
    this.rebuild();
  }

  /** A member told us its URL (peer data: checked like a caller's). Returns whether it was accepted. */
  setUrl(member: string, url: string): boolean {
    if (member === this.self || !isAdvertiseUrl(url)) return false;
    if (this.urls.get(member) === url) return true;
    if (!this.ringMembers.includes(member)) return true; // not on the ring (yet): it tells again when it joins
    this.urls.set(member, url);
    this.rebuild();
    return true;
  }

  /** ADVERTISE both ways in one call: ours in the payload, theirs in the reply (empty while unknown). */
  exchangeWith(member: string, client: Pick<PeerClient, "call"> | undefined, logger: Logger): void {
    client?.call(CallMethod.ADVERTISE, Buffer.from(this.selfUrl)).then(
      (reply) => {
        if (reply.length > 0 && !this.setUrl(member, reply.toString("utf8"))) logger.warn({ peer: member }, "peer advertised an invalid URL");
      },
      () => {}, // the connection went down: exchanged again when it is up
    );
  }

  /** A member's ADVERTISE: remember its URL, answer with ours. */
  async answerAdvertise(payload: Buffer, from: string): Promise<Buffer> {
    if (payload.length > 0 && !this.setUrl(from, payload.toString("utf8"))) throw new Error("invalid advertise URL");
    return Buffer.from(this.selfUrl);
  }

  private rebuild(): void {
    this.view = Object.freeze(this.ringMembers.map((id) => Object.freeze({ id, url: (id === this.self ? this.selfUrl : this.urls.get(id)) || null })));
    this.version = ringVersionOf(this.view);
  }
}

/** Two differently seeded 32-bit hashes of the sorted `id url` lines: 64 bits, as 16 hex digits. */
export function ringVersionOf(members: readonly DirectoryMember[]): string {
  const text = members
    .map((m) => m.id + " " + (m.url ?? ""))
    .sort()
    .join("\n");
  return hex8(hash32(text)) + hex8(hash32(text, 0x9e3779b9));
}

function hex8(n: number): string {
  return n.toString(16).padStart(8, "0");
}
