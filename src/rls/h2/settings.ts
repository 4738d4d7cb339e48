import * as F from "./frames.js";
import { ConnectionError } from "./frames.js";

/** The client's settings that bind what we send. */
export interface PeerSettings {
  initialWindow: number;
  maxFrame: number;
}

/**
 * A SETTINGS frame's payload, checked value by value (RFC 9113 §6.5.2) and applied to `peer`;
 * returns how much SETTINGS_INITIAL_WINDOW_SIZE moved (every open stream's window moves by
 * as much). Unknown identifiers are ignored, as the RFC asks. HEADER_TABLE_SIZE binds the
 * client's decoder of our blocks, which never index (header-blocks.ts): nothing to do.
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
