import { HashRing } from "../shard/ring/ring.js";
import type { NodeConnection } from "./node-connection.js";

/** One member as GET /cluster lists it (docs/client.md). */
export interface ClusterMember {
  id: string;
  url: string | null;
}

export interface ClusterAnswer {
  ringVersion: string;
  members: ClusterMember[];
}

/**
 * The longest member list accepted from a node: a bound on what a bad answer can make the
 * client build. A ring of 1,000 points per member took ~1.9 s of the app's event loop to
 * build for 1,024 members and ~0.5 s for 256 (load average 32); a longer list is refused.
 */
export const MAX_MEMBERS = 256;
/** Longest member id and URL accepted (a host:port, an http(s) URL). */
const MAX_FIELD_LENGTH = 2048;

/**
 * The client's picture of the ring, as one node described it: an immutable value, replaced
 * in one assignment when a newer one is fetched (like the nodes' own ring).
 */
export class RingView {
  constructor(
    readonly version: string,
    readonly ring: HashRing,
    /** member id → its node, or undefined while its URL is unknown */
    readonly owners: ReadonlyMap<string, NodeConnection | undefined>,
    /** every node a check may go to: the members with a URL, then the seeds that are not members */
    readonly candidates: readonly NodeConnection[],
  ) {}

  /** The node owning `ringKey`, when known. */
  ownerOf(ringKey: string): NodeConnection | undefined {
    const id = this.ring.owner(ringKey);
    return id === undefined ? undefined : this.owners.get(id);
  }
}

/** The `data` of a GET /cluster answer, checked field by field; undefined when it is not one. */
export function parseClusterAnswer(body: unknown): ClusterAnswer | undefined {
  const data = (body as { data?: unknown } | null)?.data as { ring_version?: unknown; members?: unknown } | undefined;
  if (typeof data !== "object" || data === null) return undefined;
  const { ring_version: ringVersion, members } = data;
  if (typeof ringVersion !== "string" || ringVersion.length === 0 || ringVersion.length > 64) return undefined;
  if (!Array.isArray(members) || members.length === 0 || members.length > MAX_MEMBERS) return undefined;
  const out: ClusterMember[] = [];
  for (const m of members as { id?: unknown; url?: unknown }[]) {
    if (typeof m !== "object" || m === null || typeof m.id !== "string" || m.id.length === 0 || m.id.length > MAX_FIELD_LENGTH) return undefined;
    if (m.url !== null && (typeof m.url !== "string" || m.url.length > MAX_FIELD_LENGTH)) return undefined;
    out.push({ id: m.id, url: m.url });
  }
  return { ringVersion, members: out };
}
