// Which peer protocol versions two nodes share (docs/peer-protocol.md, "Versions"): pure.

import { FEATURE_VERSIONS, PROTOCOL_MIN, PROTOCOL_VERSION, type ProtocolFeature } from "../wire/constants.js";
import { FrameError } from "../errors.js";

/** The versions a node speaks, every one from `min` to `max`. */
export interface ProtocolRange {
  readonly min: number;
  readonly max: number;
}

/**
 * What a node tells of its software (GET /cluster, docs/operations.md, Rolling upgrades): its
 * build, the versions it speaks and the one its ring runs at (the lowest its members share).
 * Here, below both the front end that shows it and the cluster that fills it in.
 */
export interface SoftwareFacts {
  readonly build: string;
  readonly protocol: ProtocolRange & { readonly ring: number };
}

/** This build's range, its top held at `max` (PEER_PROTOCOL_MAX) when given. */
export function ownRange(max: number = PROTOCOL_VERSION): ProtocolRange {
  if (!Number.isInteger(max) || max < PROTOCOL_MIN || max > PROTOCOL_VERSION) {
    throw new RangeError(`peer protocol maximum must be ${PROTOCOL_MIN} to ${PROTOCOL_VERSION}, got ${max}`);
  }
  return { min: PROTOCOL_MIN, max };
}

/** The highest version both speak, or undefined when they share none. */
export function sharedVersion(a: ProtocolRange, b: ProtocolRange): number | undefined {
  const top = Math.min(a.max, b.max);
  return top >= Math.max(a.min, b.min) ? top : undefined;
}

/** Whether a link or a ring running at `version` uses `feature`. */
export function supportsAt(version: number, feature: ProtocolFeature): boolean {
  return version >= FEATURE_VERSIONS[feature];
}

/** "11..12", or "11" for a range of one. */
export function rangeText(r: ProtocolRange): string {
  return r.min === r.max ? String(r.min) : `${r.min}..${r.max}`;
}

/** Most bytes of the members tag a PROTOCOL_CALL may carry after the range. */
export const MAX_MEMBERS_TAG_BYTES = 64;

/**
 * The PROTOCOL_CALL payload and reply: u8 min, u8 max, then optionally u8 n and n bytes of
 * printable ASCII, the sender's members tag (a digest of its static member list, PEERS; none
 * with PEERS_DNS): two members whose tags differ were given different lists.
 */
export function encodeRange(r: ProtocolRange, membersTag = ""): Buffer {
  const tag = Buffer.from(membersTag, "latin1");
  return tag.length === 0 ? Buffer.from([r.min, r.max]) : Buffer.concat([Buffer.from([r.min, r.max, tag.length]), tag]);
}

export function decodeRange(body: Buffer): ProtocolRange & { membersTag: string } {
  if (body.length < 2) throw new FrameError(`protocol range must be 2 bytes at least, got ${body.length}`);
  const min = body[0]!;
  const max = body[1]!;
  if (min > max || min === 0) throw new FrameError(`bad protocol range ${min}..${max}`);
  if (body.length === 2) return { min, max, membersTag: "" };
  const n = body[2]!;
  if (n > MAX_MEMBERS_TAG_BYTES || body.length !== 3 + n) throw new FrameError("bad members tag length");
  const tag = body.subarray(3);
  for (const b of tag) if (b < 0x21 || b > 0x7e) throw new FrameError("members tag is not printable ASCII");
  return { min, max, membersTag: tag.toString("latin1") };
}
