// The first exchange on a fresh connection (docs/peer-protocol.md, "Versions"): this node's
// protocol range told, the peer's learned, before the link counts as up.

import { LEGACY_RANGE, PROTOCOL_CALL, type ProtocolFeature } from "../wire/constants.js";
import type { PeerError } from "../errors.js";
import { encodeCall } from "../wire/messages.js";
import { decodeRange, encodeRange, rangeText, sharedVersion, supportsAt, type ProtocolRange } from "../link/versions.js";
import type { PendingCalls } from "./pending-calls.js";

/** The versions of one link: this node's, the peer's as it last told, and the one they run at. */
export class LinkProtocol {
  /** the peer's range, as it told on its last connection; undefined before */
  remote: ProtocolRange | undefined = undefined;
  /** the highest version both speak; NaN until the first connection is up */
  version = Number.NaN;
  /** the peer's members tag as it told on its last connection ("" for none: PEERS_DNS, or a node of 11) */
  remoteMembersTag = "";

  constructor(
    readonly own: ProtocolRange,
    /** this node's members tag, read at each connection */
    readonly membersTag: () => string = () => "",
  ) {}

  /** The peer told `remote`: the version the link runs at, or undefined when they share none. */
  agree(remote: ProtocolRange): number | undefined {
    this.remote = remote;
    const v = sharedVersion(this.own, remote);
    if (v !== undefined) this.version = v;
    return v;
  }

  /** Whether this link uses `feature`: both ends speak its version (constants.ts FEATURE_VERSIONS). */
  supports(feature: ProtocolFeature): boolean {
    return supportsAt(this.version, feature);
  }

  /** The peer authenticated and told a range that shares no version with this node's. */
  get apart(): boolean {
    return this.remote !== undefined && sharedVersion(this.own, this.remote) === undefined;
  }
}

/**
 * Sends PROTOCOL_CALL with this node's range and settles `link` with the peer's: its reply, or
 * LEGACY_RANGE when it answers with an error (a node of 11, built before ranges, knows no such
 * method). Resolves with undefined when the link agreed on a version, with why it must close
 * (no version shared, a reply that is not a range), or with null when the connection went first.
 */
export function askRange(calls: PendingCalls, link: LinkProtocol, timeoutMs: number, send: (frames: Buffer) => void): Promise<string | undefined | null> {
  return calls
    .start(PROTOCOL_CALL, timeoutMs, (id) => send(encodeCall(id, PROTOCOL_CALL, encodeRange(link.own, link.membersTag()))))
    .then(
      (reply) => decodeRange(reply),
      (err: PeerError) => (err.code === "remote" ? { ...LEGACY_RANGE, membersTag: "" } : null),
    )
    .then(
      (remote) => {
        if (remote === null) return null;
        link.remoteMembersTag = remote.membersTag;
        if (link.agree({ min: remote.min, max: remote.max }) !== undefined) return undefined;
        return `no shared protocol version: the peer speaks ${rangeText(remote)}, this node ${rangeText(link.own)}`;
      },
      (err: Error) => `protocol range unreadable: ${err.message}`,
    );
}
