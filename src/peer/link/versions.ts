// Which peer protocol versions two nodes share (docs/peer-protocol.md, "Versions"): pure.

import { FEATURE_VERSIONS, PROTOCOL_MIN, PROTOCOL_VERSION, type ProtocolFeature } from "../wire/constants.js";
import { FrameError } from "../errors.js";

/** The versions a node speaks, every one from `min` to `max`. */
export interface ProtocolRange {
  readonly min: number;
  readonly max: number;
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

/** The PROTOCOL_CALL payload and reply: u8 min, u8 max. */
export function encodeRange(r: ProtocolRange): Buffer {
  return Buffer.from([r.min, r.max]);
}

export function decodeRange(body: Buffer): ProtocolRange {
  if (body.length !== 2) throw new FrameError(`protocol range must be 2 bytes, got ${body.length}`);
  const min = body[0]!;
  const max = body[1]!;
  if (min > max || min === 0) throw new FrameError(`bad protocol range ${min}..${max}`);
  return { min, max };
}
