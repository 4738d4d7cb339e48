// The DECIDE and DECIDE_REPLY bodies: the hot path. Writers store straight into
// reused, doubling buffers and readers decode into reused typed arrays: no JSON
// and no object per item. Every decoder checks that the body is consumed
// exactly; anything else is a FrameError and the connection is closed without
// acting on the frame.

import { isUtf8 } from "node:buffer";
import {
  BATCH_COUNT_BYTES,
  DECIDE_BUDGET_BYTES,
  DECIDE_ITEM_FLAGS,
  DECIDE_ITEM_FIXED_BYTES,
  DecideItemFlag,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_ALGORITHM_CODE,
  MAX_CHARGE_ID_BYTES,
  MAX_DECIDE_ITEMS,
  MAX_FRAME_BYTES,
  MAX_STRING_BYTES,
  NO_BUDGET,
  TAG_BYTES,
} from "./constants.js";
import { FrameError } from "../errors.js";
import { writeFrameHeader } from "./frame.js";

// ------------------------------------------------------------------ DECIDE

/** Where a DECIDE_REPLY's first item starts, after the frame header and count. */
const BATCH_START = FRAME_HEADER_BYTES + BATCH_COUNT_BYTES;
/** Where a DECIDE's first item starts, after the frame header, count and budget. */
const DECIDE_START = BATCH_START + DECIDE_BUDGET_BYTES;
/** Where a DECIDE body's first item starts. */
const DECIDE_ITEMS_AT = BATCH_COUNT_BYTES + DECIDE_BUDGET_BYTES;

/**
 * Builds DECIDE frames for one event-loop turn. Items are written straight
 * into one reused buffer that grows by doubling. A batch that would pass the
 * frame limit or MAX_DECIDE_ITEMS is split into several frames, all returned
 * by take(), each with room for its tag.
 */
export class DecideBatchWriter {
  private buf: Buffer;
  private off = DECIDE_START;
  // Start of the frame being filled; frames before it are complete.
  private frameStart = 0;
  private frameItems = 0;
  /** Items added since the last take(), over all frames. */
  count = 0;
  /** Frames the last take() returned (one per startFrame(), and more where MAX_DECIDE_ITEMS or the byte limit split one). */
  framesTaken = 0;
  private frames = 0;
  /** The deadline told by the last startFrame(), and each sealed frame's, by frame since the last take(). */
  private deadline = 0;
  private readonly frameDeadlines: number[] = [];

  constructor(initialBytes = 16 * 1024) {
    this.buf = Buffer.allocUnsafe(Math.max(initialBytes, 64));
  }

  /**
   * Append one item. Returns false, writing nothing, when it cannot be
   * encoded: an algorithm code that is not a u8, limit, duration or cost not
   * a u32, or a string over 65535 UTF-8 bytes. `chargeId` (a charge's, with CHARGE in `flags`:
   * DecideItemFlag.CHARGE_ID) follows the identifier; one outside 1..MAX_CHARGE_ID_BYTES
   * characters of visible ASCII is not encoded either.
   */
  add(reqId: number, algorithm: number, limit: number, duration: number, ns: string, identifier: string, cost = 1, flags = 0, chargeId?: string): boolean {
    if (!(algorithm >= 0 && algorithm <= MAX_ALGORITHM_CODE && (algorithm | 0) === algorithm)) return false;
    if (!isU32(limit) || !isU32(duration) || !isU32(cost)) return false;
    const idBytes = chargeId === undefined ? 0 : 1 + chargeId.length;
    if (chargeId !== undefined && ((flags & DecideItemFlag.CHARGE) === 0 || !isWireChargeId(chargeId))) return false;
    // A UTF-16 code unit never takes more than 3 UTF-8 bytes: reserve the
    // worst case, then write the strings where they belong, measuring as we go
    // (cheaper than Buffer.byteLength followed by a write).
    const worst = DECIDE_ITEM_FIXED_BYTES + 3 * (ns.length + identifier.length) + idBytes;
    this.ensure(this.off + TAG_BYTES + DECIDE_START + worst);
    let at = this.off;
    const buf = this.buf;
    const nsLen = writeUtf8(buf, ns, at + DECIDE_ITEM_FIXED_BYTES);
    if (nsLen > MAX_STRING_BYTES) return false;
    const idLen = writeUtf8(buf, identifier, at + DECIDE_ITEM_FIXED_BYTES + nsLen);
    if (idLen > MAX_STRING_BYTES) return false;
    if (chargeId !== undefined) {
      const c = at + DECIDE_ITEM_FIXED_BYTES + nsLen + idLen;
      buf[c] = chargeId.length;
      for (let i = 0; i < chargeId.length; i++) buf[c + 1 + i] = chargeId.charCodeAt(i);
    }
    const itemBytes = DECIDE_ITEM_FIXED_BYTES + nsLen + idLen + idBytes;
    if (this.frameItems > 0 && (this.frameItems === MAX_DECIDE_ITEMS || at + itemBytes + TAG_BYTES - this.frameStart - 4 > MAX_FRAME_BYTES)) {
      // Close the current frame (its tag room goes where this item starts) and move
      // this item behind a new header.
      this.sealFrame();
      this.frameStart = this.off;
      buf.copyWithin(this.off + DECIDE_START, at, at + itemBytes);
      at = this.off + DECIDE_START;
    }
    // Values were range-checked above, so plain byte stores do (Buffer's
    // write*BE re-check every argument).
    putU32(buf, at, reqId);
    buf[at + 4] = algorithm;
    putU32(buf, at + 5, limit);
    putU32(buf, at + 9, duration);
    buf[at + 13] = nsLen >>> 8;
    buf[at + 14] = nsLen & 0xff;
    buf[at + 15] = idLen >>> 8;
    buf[at + 16] = idLen & 0xff;
    putU32(buf, at + 17, cost);
    buf[at + 21] = (flags & DECIDE_ITEM_FLAGS & ~DecideItemFlag.CHARGE_ID) | (chargeId !== undefined ? DecideItemFlag.CHARGE_ID : 0);
    this.off = at + itemBytes;
    this.frameItems++;
    this.count++;
    return true;
  }

  /**
   * The items added from here on go in a new frame (those before keep theirs), whose waiters
   * give up at `deadline` (any number the caller's budget function reads, see take()): one
   * frame per event-loop turn, so that each carries its own turn's budget.
   */
  startFrame(deadline: number): void {
    if (this.frameItems > 0) {
      this.sealFrame();
      this.frameStart = this.off;
      this.off += DECIDE_START;
    }
    this.deadline = deadline;
  }

  /**
   * The frames built since the last take(), back to back in a new buffer
   * (the socket may hold on to it, so it cannot be the reused one), or null
   * when empty. Resets the writer. Every frame gets a budget (µs, see
   * DECIDE_BUDGET_BYTES): `budgetUs`, or when a function, its answer for the frame's
   * deadline (startFrame): the items of one frame share their sender's deadline.
   */
  take(budgetUs: number | ((deadline: number) => number) = NO_BUDGET): Buffer | null {
    if (this.count === 0) return null;
    this.sealFrame();
    const buf = this.buf;
    // Frames are back to back: u32 length (type, payload and tag, not itself), then the rest.
    let k = 0;
    for (let at = 0; at < this.off; at += 4 + buf.readUInt32BE(at)) {
      const us = typeof budgetUs === "number" ? budgetUs : budgetUs(this.frameDeadlines[k++]!);
      putU32(buf, at + BATCH_START, us >= 0 && us < NO_BUDGET ? Math.floor(us) : NO_BUDGET);
    }
    const out = Buffer.allocUnsafe(this.off);
    buf.copy(out, 0, 0, this.off);
    const frames = this.frames;
    this.reset();
    this.framesTaken = frames;
    return out;
  }

  /** Drop everything added since the last take(). */
  reset(): void {
    this.off = DECIDE_START;
    this.frameStart = 0;
    this.frameItems = 0;
    this.count = 0;
    this.frames = 0;
  }

  /** Finish the frame being filled: header, item count, and TAG_BYTES of room after its last item. */
  private sealFrame(): void {
    const payload = this.off - this.frameStart - FRAME_HEADER_BYTES;
    writeFrameHeader(this.buf, this.frameStart, FrameType.DECIDE, payload);
    this.buf.writeUInt32BE(this.frameItems, this.frameStart + FRAME_HEADER_BYTES);
    this.off += TAG_BYTES;
    this.frameItems = 0;
    this.frameDeadlines[this.frames++] = this.deadline;
  }

  private ensure(need: number): void {
    if (need <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < need) cap *= 2;
    const grown = Buffer.allocUnsafe(cap);
    this.buf.copy(grown, 0, 0, this.off);
    this.buf = grown;
  }
}

export function putU32(buf: Buffer, at: number, v: number): void {
  buf[at] = v >>> 24;
  buf[at + 1] = (v >>> 16) & 0xff;
  buf[at + 2] = (v >>> 8) & 0xff;
  buf[at + 3] = v & 0xff;
}

/**
 * UTF-8 encode `s` at `at` (room for 3 bytes per code unit is reserved by
 * the caller); returns the bytes written. Identifiers and namespaces are
 * short and nearly always ASCII: a JS loop stores those in ~half the time
 * of buf.write (measured: 102 vs 183 ns for a 5- plus a 20-char string,
 * Node 20). The first non-ASCII code unit hands the whole string to buf.write.
 */
function writeUtf8(buf: Buffer, s: string, at: number): number {
  const n = s.length;
  if (n > 64) return buf.write(s, at, "utf8");
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return buf.write(s, at, "utf8");
    buf[at + i] = c;
  }
  return n;
}

/** 1 to MAX_CHARGE_ID_BYTES characters of visible ASCII (0x21 to 0x7E): what a charge id may be (REQUEST_BOUNDS.chargeId). */
function isWireChargeId(id: string): boolean {
  if (id.length < 1 || id.length > MAX_CHARGE_ID_BYTES) return false;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

function isU32(n: number): boolean {
  return n >= 0 && n <= 0xffffffff && Math.floor(n) === n;
}

/**
 * The items of one DECIDE body, decoded into reused columns. decode()
 * validates the whole body before anything is exposed, so a frame that is
 * bad anywhere is rejected as a whole and none of its items is decided.
 */
export class DecideBatchReader {
  count = 0;
  /** The frame's budget (µs from its receipt), or NO_BUDGET. */
  budgetUs = NO_BUDGET;
  reqIds = new Uint32Array(256);
  algorithms = new Uint8Array(256);
  limits = new Uint32Array(256);
  durations = new Uint32Array(256);
  costs = new Uint32Array(256);
  flags = new Uint8Array(256);
  namespaces: string[] = [];
  identifiers: string[] = [];
  /** a charge's id (DecideItemFlag.CHARGE_ID), "" for an item without one; its content is the handler's to judge */
  chargeIds: string[] = [];

  decode(body: Buffer): void {
    this.count = 0;
    const end = body.length;
    if (end < DECIDE_ITEMS_AT) throw new FrameError("DECIDE without item count and budget");
    const n = body.readUInt32BE(0);
    // Each item takes at least its fixed part; reject impossible counts
    // before sizing anything by them, and counts that would hold the loop.
    if (n === 0 || n > MAX_DECIDE_ITEMS || n > (end - DECIDE_ITEMS_AT) / DECIDE_ITEM_FIXED_BYTES) {
      throw new FrameError(`DECIDE item count ${n} outside 1..${MAX_DECIDE_ITEMS} or does not fit ${end} bytes`);
    }
    if (n > this.reqIds.length) this.grow(n);
    const { reqIds, algorithms, limits, durations, costs, flags, namespaces, identifiers, chargeIds } = this;
    let pos = DECIDE_ITEMS_AT;
    let prevNsStart = -1;
    let prevNsLen = -1;
    let prevNs = "";
    for (let i = 0; i < n; i++) {
      if (end - pos < DECIDE_ITEM_FIXED_BYTES) throw new FrameError(`DECIDE item ${i} truncated`);
      const nsLen = (body[pos + 13]! << 8) | body[pos + 14]!;
      const idLen = (body[pos + 15]! << 8) | body[pos + 16]!;
      const nsStart = pos + DECIDE_ITEM_FIXED_BYTES;
      const idStart = nsStart + nsLen;
      let itemEnd = idStart + idLen;
      if (itemEnd > end) throw new FrameError(`DECIDE item ${i} strings run past the frame`);
      const identifierEnd = itemEnd;
      // Bounds were checked above: plain byte loads, not Buffer's checked readers.
      reqIds[i] = getU32(body, pos);
      algorithms[i] = body[pos + 4]!;
      limits[i] = getU32(body, pos + 5);
      durations[i] = getU32(body, pos + 9);
      costs[i] = getU32(body, pos + 17);
      const itemFlags = body[pos + 21]!;
      if (
        (itemFlags & ~DECIDE_ITEM_FLAGS) !== 0 ||
        (itemFlags & (DecideItemFlag.CHARGE | DecideItemFlag.REFUND)) === DecideItemFlag.REFUND ||
        (itemFlags & (DecideItemFlag.CHARGE | DecideItemFlag.CHARGE_ID)) === DecideItemFlag.CHARGE_ID
      )
        throw new FrameError(`DECIDE item ${i}: unknown flags ${itemFlags}`);
      flags[i] = itemFlags;
      if ((itemFlags & DecideItemFlag.CHARGE_ID) !== 0) {
        // u8 length, then the id: its bytes are read one per character (latin1), and judged by the handler.
        const idBytes = itemEnd < end ? body[itemEnd]! : 0;
        if (idBytes < 1 || idBytes > MAX_CHARGE_ID_BYTES || itemEnd + 1 + idBytes > end)
          throw new FrameError(`DECIDE item ${i}: charge id runs past the frame or out of bounds`);
        chargeIds[i] = body.toString("latin1", itemEnd + 1, itemEnd + 1 + idBytes);
        itemEnd += 1 + idBytes;
      } else chargeIds[i] = "";
      // A batch usually repeats a few namespaces: reuse the previous item's
      // string when the bytes are the same instead of decoding again.
      if (nsLen === prevNsLen && sameBytes(body, prevNsStart, nsStart, nsLen)) {
        namespaces[i] = prevNs;
      } else {
        prevNs = namespaces[i] = decodeUtf8(body, nsStart, idStart);
        prevNsStart = nsStart;
        prevNsLen = nsLen;
      }
      identifiers[i] = decodeUtf8(body, idStart, identifierEnd);
      pos = itemEnd;
    }
    if (pos !== end) throw new FrameError(`DECIDE has ${end - pos} trailing bytes`);
    this.budgetUs = getU32(body, BATCH_COUNT_BYTES);
    this.count = n;
  }

  private grow(n: number): void {
    let cap = this.reqIds.length * 2;
    while (cap < n) cap *= 2;
    this.reqIds = new Uint32Array(cap);
    this.algorithms = new Uint8Array(cap);
    this.limits = new Uint32Array(cap);
    this.durations = new Uint32Array(cap);
    this.costs = new Uint32Array(cap);
    this.flags = new Uint8Array(cap);
  }
}

export function getU32(buf: Buffer, at: number): number {
  return ((buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) | buf[at + 3]!) >>> 0;
}

/** Short byte ranges compare faster in JS than through a native call. */
function sameBytes(buf: Buffer, a: number, b: number, len: number): boolean {
  if (len > 64) return buf.compare(buf, a, a + len, b, b + len) === 0;
  for (let i = 0; i < len; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}

/**
 * Strict UTF-8: invalid bytes are a decode error, not U+FFFD. Validating
 * every string natively would cost a subarray per string, so only strings
 * that decoded to a replacement character (rare: our own encoder writes lone
 * surrogates as EF BF BD, which is valid) are checked byte by byte.
 */
function decodeUtf8(buf: Buffer, start: number, end: number): string {
  const s = buf.toString("utf8", start, end);
  if (s.indexOf("\ufffd") !== -1 && !isUtf8(buf.subarray(start, end))) {
    throw new FrameError("string is not valid UTF-8");
  }
  return s;
}

/** For tests and debugging: the items of a DECIDE body as objects. */
export interface DecideItem {
  reqId: number;
  algorithm: number;
  limit: number;
  duration: number;
  cost: number;
  flags: number;
  ns: string;
  identifier: string;
  /** absent when the item carries none */
  chargeId?: string;
}
export function decodeDecideItems(body: Buffer): DecideItem[] {
  const r = new DecideBatchReader();
  r.decode(body);
  const items: DecideItem[] = [];
  for (let i = 0; i < r.count; i++) {
    items.push({
      reqId: r.reqIds[i]!,
      algorithm: r.algorithms[i]!,
      limit: r.limits[i]!,
      duration: r.durations[i]!,
      cost: r.costs[i]!,
      flags: r.flags[i]!,
      ns: r.namespaces[i]!,
      identifier: r.identifiers[i]!,
      ...(r.chargeIds[i] !== "" ? { chargeId: r.chargeIds[i]! } : {}),
    });
  }
  return items;
}
