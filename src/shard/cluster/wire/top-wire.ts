import { isUtf8 } from "node:buffer";
import type { TopEntry } from "../../../metrics/top-blocked.js";

/*
 * The CALL that asks a member for its identifiers blocked most (GET /top, merged across the
 * ring). Binary like the rest of the peer channel; every decoder checks bounds and throws on
 * a body that is bad anywhere (the CALL answers an error, the asking node goes on without
 * that member).
 */

/** The most entries one member is asked for (GET /top's `n` is at most 1,000; a member is asked for a margin more). */
export const MAX_TOP_ENTRIES = 4000;
/** Namespace prefixes of a scoped key, at most. */
const MAX_PREFIXES = 1024;
const ANY = 0xffff;

export interface TopRequest {
  n: number;
  /** only this effective namespace, when given */
  namespace: string | undefined;
  /** the asking key's namespace prefixes; null: any namespace */
  prefixes: string[] | null;
}

/** TOP: u16 n, u16 nsLen (0: any) + ns, u16 prefix count (0xffff: any) + each u16 len + prefix. */
export function encodeTopRequest(q: TopRequest): Buffer {
  const parts: Buffer[] = [];
  const u16 = (v: number) => {
    const b = Buffer.allocUnsafe(2);
    b.writeUInt16BE(v, 0);
    parts.push(b);
  };
  const str = (s: string) => {
    const b = Buffer.from(s, "utf8");
    u16(b.length);
    parts.push(b);
  };
  u16(q.n);
  str(q.namespace ?? "");
  if (q.prefixes === null) u16(ANY);
  else {
    u16(q.prefixes.length);
    for (const p of q.prefixes) str(p);
  }
  return Buffer.concat(parts);
}

export function decodeTopRequest(buf: Buffer): TopRequest {
  let o = 0;
  const u16 = () => {
    if (o + 2 > buf.length) throw new RangeError("TOP truncated");
    const v = buf.readUInt16BE(o);
    o += 2;
    return v;
  };
  const str = () => {
    const n = u16();
    if (o + n > buf.length || !isUtf8(buf.subarray(o, o + n))) throw new RangeError("TOP string truncated or not UTF-8");
    const s = buf.toString("utf8", o, o + n);
    o += n;
    return s;
  };
  const n = u16();
  if (n < 1 || n > MAX_TOP_ENTRIES) throw new RangeError("TOP n out of bounds");
  const namespace = str();
  const count = u16();
  let prefixes: string[] | null = null;
  if (count !== ANY) {
    if (count > MAX_PREFIXES) throw new RangeError("TOP: too many prefixes");
    prefixes = [];
    for (let i = 0; i < count; i++) prefixes.push(str());
  }
  if (o !== buf.length) throw new RangeError("TOP has trailing bytes");
  return { n, namespace: namespace === "" ? undefined : namespace, prefixes };
}

/** Reply: u16 count, each: u16 nsLen, ns, u16 idLen, id, f64 count, f64 error. */
export function encodeTopReply(entries: readonly TopEntry[]): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.allocUnsafe(2);
  head.writeUInt16BE(entries.length, 0);
  parts.push(head);
  for (const e of entries) {
    const ns = Buffer.from(e.namespace, "utf8");
    const id = Buffer.from(e.identifier, "utf8");
    const b = Buffer.allocUnsafe(2 + ns.length + 2 + id.length + 16);
    let o = b.writeUInt16BE(ns.length, 0);
    o += ns.copy(b, o);
    o = b.writeUInt16BE(id.length, o);
    o += id.copy(b, o);
    o = b.writeDoubleBE(e.count, o);
    b.writeDoubleBE(e.error, o);
    parts.push(b);
  }
  return Buffer.concat(parts);
}

/** A member's reply: at most `max` entries, counts finite and non-negative, error within the count. */
export function decodeTopReply(buf: Buffer, max: number): TopEntry[] {
  if (buf.length < 2) throw new RangeError("TOP reply truncated");
  const n = buf.readUInt16BE(0);
  if (n > max) throw new RangeError("TOP reply has more entries than asked");
  const entries: TopEntry[] = [];
  let o = 2;
  const str = () => {
    if (o + 2 > buf.length) throw new RangeError("TOP reply truncated");
    const len = buf.readUInt16BE(o);
    o += 2;
    if (o + len > buf.length || !isUtf8(buf.subarray(o, o + len))) throw new RangeError("TOP reply string truncated or not UTF-8");
    const s = buf.toString("utf8", o, o + len);
    o += len;
    return s;
  };
  for (let i = 0; i < n; i++) {
    const namespace = str();
    const identifier = str();
    if (o + 16 > buf.length) throw new RangeError("TOP reply truncated");
    const count = buf.readDoubleBE(o);
    const error = buf.readDoubleBE(o + 8);
    o += 16;
    if (!(Number.isInteger(count) && count >= 0 && Number.isInteger(error) && error >= 0 && error <= count)) throw new RangeError("TOP reply count out of bounds");
    entries.push({ namespace, identifier, count, error });
  }
  if (o !== buf.length) throw new RangeError("TOP reply has trailing bytes");
  return entries;
}
