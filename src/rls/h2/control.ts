import * as F from "./frames.js";
import { ConnectionError } from "./frames.js";
import type { H2Limits, H2Stream } from "./stream.js";

/** Our SETTINGS and the connection window beyond the default: the first bytes a connection sends. */
export function serverPreface(limits: H2Limits, connectionWindow: number): Buffer {
  const settings = F.settingsFrame([
    [F.SETTINGS_MAX_CONCURRENT_STREAMS, limits.maxConcurrentStreams],
    [F.SETTINGS_MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes],
    [F.SETTINGS_ENABLE_PUSH, 0],
  ]);
  return Buffer.concat([settings, F.windowUpdateFrame(0, connectionWindow - F.DEFAULT_WINDOW)]);
}

/** SETTINGS_INITIAL_WINDOW_SIZE changed: every open stream's window moves by the difference (RFC 9113 §6.9.2). */
export function moveWindows(streams: Iterable<H2Stream>, delta: number): void {
  for (const stream of streams) {
    stream.sendWindow += delta;
    if (stream.sendWindow > F.MAX_WINDOW) throw new ConnectionError(F.FLOW_CONTROL_ERROR, "stream window past 2^31-1");
  }
}

/**
 * The fixed shape of each control frame (RFC 9113 §6): which stream it may name, how long
 * its payload is. A frame of the wrong shape is a connection error.
 */
export function checkShape(type: number, flags: number, id: number, length: number): void {
  const fail = (code: number, why: string): never => {
    throw new ConnectionError(code, why);
  };
  switch (type) {
    case F.SETTINGS:
      if (id !== 0) fail(F.PROTOCOL_ERROR, "SETTINGS on a stream");
      if (flags & F.ACK && length !== 0) fail(F.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      return;
    case F.PING:
      if (id !== 0) fail(F.PROTOCOL_ERROR, "PING on a stream");
      if (length !== 8) fail(F.FRAME_SIZE_ERROR, "PING of other than 8 bytes");
      return;
    case F.PRIORITY:
      if (id === 0) fail(F.PROTOCOL_ERROR, "PRIORITY on stream 0");
      if (length !== 5) fail(F.FRAME_SIZE_ERROR, "PRIORITY of other than 5 bytes");
      return;
    case F.GOAWAY:
      if (id !== 0) fail(F.PROTOCOL_ERROR, "GOAWAY on a stream");
      if (length < 8) fail(F.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
      return;
    case F.RST_STREAM:
      if (id === 0) fail(F.PROTOCOL_ERROR, "RST_STREAM on stream 0");
      if (length !== 4) fail(F.FRAME_SIZE_ERROR, "RST_STREAM of other than 4 bytes");
      return;
    case F.WINDOW_UPDATE:
      if (length !== 4) fail(F.FRAME_SIZE_ERROR, "WINDOW_UPDATE of other than 4 bytes");
      return;
    case F.PUSH_PROMISE:
      fail(F.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
  }
}

/** The client's settings that bind what we send. */
export interface PeerSettings {
  initialWindow: number;
  maxFrame: number;
}

/**
 * A SETTINGS frame's payload, checked value by value (RFC 9113 §6.5.2) and applied to `peer`;
 * returns how much SETTINGS_INITIAL_WINDOW_SIZE moved (every open stream's window moves by
 * as much). Unknown identifiers are ignored, as the RFC asks. HEADER_TABLE_SIZE binds the
 * client's decoder of our blocks, which never index (response-blocks.ts): nothing to do.
 */
export function applySettings(peer: PeerSettings, buf: Buffer, start: number, end: number): number {
  if ((end - start) % 6 !== 0) throw new ConnectionError(F.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
  let delta = 0;
  for (let p = start; p < end; p += 6) {
    const id = buf.readUInt16BE(p);
    const value = buf.readUInt32BE(p + 2);
    switch (id) {
      case F.SETTINGS_ENABLE_PUSH:
        if (value > 1) throw new ConnectionError(F.PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH other than 0 or 1");
        break;
      case F.SETTINGS_INITIAL_WINDOW_SIZE:
        if (value > F.MAX_WINDOW) throw new ConnectionError(F.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1");
        delta += value - peer.initialWindow;
        peer.initialWindow = value;
        break;
      case F.SETTINGS_MAX_FRAME_SIZE:
        if (value < F.DEFAULT_MAX_FRAME || value > F.MAX_FRAME_LIMIT) throw new ConnectionError(F.PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range");
        peer.maxFrame = value;
        break;
    }
  }
  return delta;
}

/** streams remembered after the client ended them: enough for frames a broken client sends right after */
const ENDED_KEPT = 64;

/**
 * The last ENDED_KEPT streams the client had ended itself (END_STREAM or RST_STREAM) before
 * they closed. A DATA or HEADERS on one of them is the client's error, STREAM_CLOSED (RFC 9113
 * §5.1); one on a stream we ended first may be in flight and is dropped. Older ones are
 * forgotten, and dropped too: the bound is the memory, not the rule.
 */
export class EndedStreams {
  private readonly ids = new Int32Array(ENDED_KEPT);
  private next = 0;

  add(id: number): void {
    this.ids[this.next] = id;
    this.next = (this.next + 1) % ENDED_KEPT;
  }

  has(id: number): boolean {
    return this.ids.includes(id);
  }
}

/** gaps remembered in the client's stream ids: a client skips ids rarely, if ever */
const GAPS_KEPT = 16;

/**
 * The last GAPS_KEPT runs of stream ids the client skipped. Opening a stream closes every
 * idle one below it (RFC 9113 §5.1.1), so a HEADERS later on a skipped id is "an unexpected
 * stream identifier": a connection error, PROTOCOL_ERROR. Without this a block on such an id
 * looked like one on a stream we had ended first, which is dropped. Only the gaps are kept,
 * not every id used; a gap forgotten is dropped as before: the bound is the memory.
 */
export class SkippedIds {
  private readonly runs = new Int32Array(GAPS_KEPT * 2);
  private next = 0;

  /** the client opened `id` after `last` (0: none yet) */
  opened(last: number, id: number): void {
    const first = last === 0 ? 1 : last + 2;
    if (id <= first) return;
    this.runs[this.next * 2] = first;
    this.runs[this.next * 2 + 1] = id - 1;
    this.next = (this.next + 1) % GAPS_KEPT;
  }

  has(id: number): boolean {
    for (let i = 0; i < this.runs.length; i += 2) if (id >= this.runs[i]! && id <= this.runs[i + 1]!) return true;
    return false;
  }
}
