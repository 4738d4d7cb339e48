import type { ReleaseOutcome, ReleaseQuery } from "../../../decision.js";
import { BatchMode, decodeBatchRequest, encodeBatchRequest } from "./batch-wire.js";

/*
 * CALL RELEASE (protocol 12, feature RELEASE): a concurrency lease to free on the key's owner (docs/api.md,
 * POST /limit/release). The member the release came in by has checked the lease's signature.
 *   payload: u32 lapse (unix s, the granting owner's clock), u8 flags (1: renew), u8 id length,
 *            id (ASCII base64url; empty: free the `cost` oldest slots), then the key's query as a one-item BATCH body (same checks).
 *   reply:   u8 released (0/1), u32 a renewal's lapse (unix s, the owner's clock; 0: none), u32 remaining.
 */

const RENEW = 1;
/** A lease's id is its 16-byte MAC as base64url: 22 characters. */
const MAX_ID_BYTES = 64;

export function encodeRelease(rq: ReleaseQuery): Buffer {
  const id = Buffer.from(rq.leaseId, "latin1");
  if (id.length > MAX_ID_BYTES) throw new RangeError("RELEASE: lease id too long");
  const body = encodeBatchRequest(BatchMode.DECIDE, 0, 0, [rq.query]);
  const buf = Buffer.allocUnsafe(6 + id.length + body.length);
  buf.writeUInt32BE(rq.lapseS >>> 0, 0);
  buf.writeUInt8(rq.renew ? RENEW : 0, 4);
  buf.writeUInt8(id.length, 5);
  id.copy(buf, 6);
  body.copy(buf, 6 + id.length);
  return buf;
}

export function decodeRelease(buf: Buffer): ReleaseQuery {
  if (buf.length < 6) throw new RangeError("RELEASE too short");
  const flags = buf.readUInt8(4);
  const idLength = buf.readUInt8(5);
  if (flags > RENEW || idLength > MAX_ID_BYTES || buf.length < 6 + idLength) throw new RangeError("RELEASE out of bounds");
  const leaseId = buf.toString("latin1", 6, 6 + idLength);
  if (!/^[A-Za-z0-9_-]*$/.test(leaseId)) throw new RangeError("RELEASE: lease id not base64url");
  const request = decodeBatchRequest(buf.subarray(6 + idLength));
  if (request.queries.length !== 1) throw new RangeError("RELEASE: one key");
  return { lapseS: buf.readUInt32BE(0), renew: flags === RENEW, leaseId, query: request.queries[0]! };
}

export function encodeReleaseReply(outcome: ReleaseOutcome): Buffer {
  const buf = Buffer.alloc(9);
  if (!outcome.ok) return buf;
  buf.writeUInt8(outcome.released ? 1 : 0, 0);
  buf.writeUInt32BE(outcome.renewedLapseS >>> 0, 1);
  buf.writeUInt32BE(outcome.remaining >>> 0, 5);
  return buf;
}

export function decodeReleaseReply(buf: Buffer): ReleaseOutcome {
  if (buf.length !== 9 || buf.readUInt8(0) > 1) throw new RangeError("RELEASE reply");
  return { ok: true, released: buf.readUInt8(0) === 1, renewedLapseS: buf.readUInt32BE(1), remaining: buf.readUInt32BE(5) };
}
