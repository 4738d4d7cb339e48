// Encoding and decoding of the frame bodies (DECIDE and DECIDE_REPLY, the hot
// path, are in decide-frames.ts). Every decoder checks that the body is
// consumed exactly; anything else is a FrameError and the connection is closed
// without acting on the frame.

import { isUtf8 } from "node:buffer";
import {
  CALL_HEADER_BYTES,
  CALL_REPLY_HEADER_BYTES,
  FRAME_HEADER_BYTES,
  FrameType,
  MAC_BYTES,
  MAX_FRAME_BYTES,
  MAX_NODE_ID_BYTES,
  NONCE_BYTES,
  PROTOCOL_MIN,
  TAG_BYTES,
} from "./constants.js";
import { FrameError } from "../errors.js";
import { encodeHandshakeFrame, sealedFrameBytes, writeFrameHeader } from "./frame.js";

// ---------------------------------------------------------------- handshake

export interface Hello {
  /** the lowest protocol version the sender speaks (its only one, for a node of 11) */
  version: number;
  nonce: Buffer;
  /** who is calling */
  clientNodeId: string;
  /** whom the caller means to reach; the server refuses a HELLO not meant for it */
  serverNodeId: string;
}
export interface Challenge {
  nonce: Buffer;
  proof: Buffer;
}

export function nodeIdBytes(nodeId: string): Buffer {
  const b = Buffer.from(nodeId, "utf8");
  if (b.length === 0 || b.length > MAX_NODE_ID_BYTES || !isUtf8(b) || b.toString("utf8") !== nodeId) {
    throw new FrameError(`node id must be 1..${MAX_NODE_ID_BYTES} bytes of well-formed UTF-8`);
  }
  return b;
}

/** A u16-length-prefixed node id at `at`; returns it and where it ends. */
function readNodeId(body: Buffer, at: number): { id: string; end: number } {
  if (body.length < at + 2) throw new FrameError("node id length missing");
  const n = body.readUInt16BE(at);
  const end = at + 2 + n;
  if (n === 0 || n > MAX_NODE_ID_BYTES || body.length < end) throw new FrameError("bad node id length");
  const raw = body.subarray(at + 2, end);
  if (!isUtf8(raw)) throw new FrameError("node id is not UTF-8");
  return { id: raw.toString("utf8"), end };
}

/**
 * HELLO body: u8 version, nonceC[32], u16 len + clientNodeId, u16 len + serverNodeId. The
 * version is the lowest the sender speaks: a node of 11 accepts a HELLO of 11 only, and every
 * node since takes any from 11 up (the ranges are told after the handshake: PROTOCOL_CALL).
 */
export function encodeHello(nonce: Buffer, clientNodeId: string, serverNodeId: string, version: number = PROTOCOL_MIN): Buffer {
  const c = nodeIdBytes(clientNodeId);
  const s = nodeIdBytes(serverNodeId);
  const body = Buffer.allocUnsafe(1 + NONCE_BYTES + 2 + c.length + 2 + s.length);
  body[0] = version;
  nonce.copy(body, 1, 0, NONCE_BYTES);
  let at = body.writeUInt16BE(c.length, 1 + NONCE_BYTES);
  at += c.copy(body, at);
  at = body.writeUInt16BE(s.length, at);
  s.copy(body, at);
  return encodeHandshakeFrame(FrameType.HELLO, body);
}

export function decodeHello(body: Buffer): Hello {
  if (body.length < 1 + NONCE_BYTES) throw new FrameError("HELLO too short");
  const client = readNodeId(body, 1 + NONCE_BYTES);
  const server = readNodeId(body, client.end);
  if (server.end !== body.length) throw new FrameError("HELLO has trailing bytes");
  return { version: body[0]!, nonce: Buffer.from(body.subarray(1, 1 + NONCE_BYTES)), clientNodeId: client.id, serverNodeId: server.id };
}

/** CHALLENGE body: nonceS[32], serverProof[32]. */
export function encodeChallenge(nonce: Buffer, proof: Buffer): Buffer {
  return encodeHandshakeFrame(FrameType.CHALLENGE, Buffer.concat([nonce.subarray(0, NONCE_BYTES), proof.subarray(0, MAC_BYTES)]));
}

export function decodeChallenge(body: Buffer): Challenge {
  if (body.length !== NONCE_BYTES + MAC_BYTES) throw new FrameError(`CHALLENGE must be ${NONCE_BYTES + MAC_BYTES} bytes`);
  return { nonce: Buffer.from(body.subarray(0, NONCE_BYTES)), proof: Buffer.from(body.subarray(NONCE_BYTES)) };
}

/** PROOF body: clientProof[32]. */
export function encodeProof(mac: Buffer): Buffer {
  return encodeHandshakeFrame(FrameType.PROOF, mac.subarray(0, MAC_BYTES));
}

export function decodeProof(body: Buffer): Buffer {
  if (body.length !== MAC_BYTES) throw new FrameError("PROOF must be 32 bytes");
  return Buffer.from(body);
}

// --------------------------------------------------------------- heartbeat

/** PING / PONG body: f64 timestamp (the client's monotonic clock, ms); PONG echoes it. */
export function encodePing(type: number, timestampMs: number): Buffer {
  const frame = Buffer.allocUnsafe(sealedFrameBytes(8));
  writeFrameHeader(frame, 0, type, 8);
  frame.writeDoubleBE(timestampMs, FRAME_HEADER_BYTES);
  return frame;
}

export function decodePing(body: Buffer): number {
  if (body.length !== 8) throw new FrameError("PING body must be 8 bytes");
  return body.readDoubleBE(0);
}

/** The longest tag a PONG carries (the server's policy version is 12 hex digits, or "none"). */
export const MAX_PONG_TAG_BYTES = 64;

/**
 * PONG body: the PING's f64 timestamp echoed, then f64 the server's wall clock (unix ms)
 * when it answered, from which the client estimates the offset between their clocks, then
 * u8 n and n bytes of printable ASCII: the server's tag (its policy version, so members
 * exchange their policy versions with every heartbeat). An 8-byte PONG carries no wall
 * clock (NaN), a 16-byte one no tag ("").
 */
export function encodePong(echoMs: number, wallMs: number, tag = ""): Buffer {
  const n = isPongTag(tag) ? tag.length : 0;
  const frame = Buffer.allocUnsafe(sealedFrameBytes(17 + n));
  writeFrameHeader(frame, 0, FrameType.PONG, 17 + n);
  frame.writeDoubleBE(echoMs, FRAME_HEADER_BYTES);
  frame.writeDoubleBE(wallMs, FRAME_HEADER_BYTES + 8);
  frame[FRAME_HEADER_BYTES + 16] = n;
  if (n > 0) frame.write(tag, FRAME_HEADER_BYTES + 17, "latin1");
  return frame;
}

export function decodePong(body: Buffer, out: { echoMs: number; wallMs: number; tag: string }): void {
  if (body.length !== 8 && body.length !== 16 && !(body.length >= 17 && body.length === 17 + body[16]!)) {
    throw new FrameError("PONG body must be 8 or 16 bytes, or 17 and its tag");
  }
  out.echoMs = body.readDoubleBE(0);
  out.wallMs = body.length >= 16 ? body.readDoubleBE(8) : NaN;
  const tag = body.length > 17 ? body.toString("latin1", 17) : "";
  if (tag.length > MAX_PONG_TAG_BYTES || !isPongTag(tag)) throw new FrameError("PONG tag must be printable ASCII");
  out.tag = tag;
}

function isPongTag(tag: string): boolean {
  return tag.length <= MAX_PONG_TAG_BYTES && /^[\x21-\x7e]*$/.test(tag);
}

export * from "./decide-frames.js";
export * from "./decide-reply.js";

// -------------------------------------------------------------------- CALL

export interface CallRequest {
  callId: number;
  method: number;
  /** A copy: it outlives the frame. */
  payload: Buffer;
}
export interface CallReply {
  callId: number;
  status: number;
  /** A copy: it outlives the frame. */
  payload: Buffer;
}

/** Largest call() payload that fits in one frame. */
export const MAX_CALL_PAYLOAD_BYTES = MAX_FRAME_BYTES - 1 - CALL_HEADER_BYTES - TAG_BYTES;

/** CALL body: u32 callId, u16 method, payload. */
export function encodeCall(callId: number, method: number, payload: Buffer): Buffer {
  if (payload.length > MAX_CALL_PAYLOAD_BYTES) throw new FrameError("call payload exceeds the frame limit");
  const frame = Buffer.allocUnsafe(sealedFrameBytes(CALL_HEADER_BYTES + payload.length));
  writeFrameHeader(frame, 0, FrameType.CALL, CALL_HEADER_BYTES + payload.length);
  frame.writeUInt32BE(callId, FRAME_HEADER_BYTES);
  frame.writeUInt16BE(method, FRAME_HEADER_BYTES + 4);
  payload.copy(frame, FRAME_HEADER_BYTES + CALL_HEADER_BYTES);
  return frame;
}

export function decodeCall(body: Buffer): CallRequest {
  if (body.length < CALL_HEADER_BYTES) throw new FrameError("CALL too short");
  return {
    callId: body.readUInt32BE(0),
    method: body.readUInt16BE(4),
    payload: Buffer.from(body.subarray(CALL_HEADER_BYTES)),
  };
}

/** CALL_REPLY body: u32 callId, u8 status (0 ok, 1 error), payload or UTF-8 error message. */
export function encodeCallReply(callId: number, status: number, payload: Buffer): Buffer {
  if (payload.length > MAX_FRAME_BYTES - 1 - CALL_REPLY_HEADER_BYTES - TAG_BYTES) {
    throw new FrameError("call reply exceeds the frame limit");
  }
  const frame = Buffer.allocUnsafe(sealedFrameBytes(CALL_REPLY_HEADER_BYTES + payload.length));
  writeFrameHeader(frame, 0, FrameType.CALL_REPLY, CALL_REPLY_HEADER_BYTES + payload.length);
  frame.writeUInt32BE(callId, FRAME_HEADER_BYTES);
  frame[FRAME_HEADER_BYTES + 4] = status;
  payload.copy(frame, FRAME_HEADER_BYTES + CALL_REPLY_HEADER_BYTES);
  return frame;
}

export function decodeCallReply(body: Buffer): CallReply {
  if (body.length < CALL_REPLY_HEADER_BYTES) throw new FrameError("CALL_REPLY too short");
  const status = body[4]!;
  if (status > 1) throw new FrameError(`CALL_REPLY unknown status ${status}`);
  return {
    callId: body.readUInt32BE(0),
    status,
    payload: Buffer.from(body.subarray(CALL_REPLY_HEADER_BYTES)),
  };
}

/**
 * One decision asked of an owner: what a DECIDE item carries, crossing the peer boundary as
 * one object both ways. A sender passes the query it already has (the cluster passes the
 * front end's LimitQuery: its `algorithm` is the Algorithm, whose code the wire carries);
 * the server hands its handler one object reused for every item, whose `algorithm` holds
 * only the code read, for the handler to resolve. Neither side allocates per item.
 */
export interface DecideQuery {
  readonly namespace: string;
  readonly identifier: string;
  readonly algorithm: { readonly code: number };
  readonly limit: number;
  /** seconds */
  readonly duration: number;
  /** what the request weighs; 0 is a peek */
  readonly cost: number;
  /** the owner's overrides and shadow mode apply (DecideItemFlag.OVERRIDABLE); absent: false */
  readonly overridable?: boolean;
  /** read from DecideItemFlag.OPENING by the server; a sender passes that flag to PeerClient.decide instead */
  readonly opening?: boolean;
  /** counted whatever remains, a refund when cost < 0 (DecideItemFlag.CHARGE, REFUND); absent: false */
  readonly charge?: boolean;
  /** a charge's id (DecideItemFlag.CHARGE_ID, protocol 13): its owner counts it at most once; absent: none */
  readonly chargeId?: string | undefined;
}

/** The server's reused DecideQuery, filled from a DECIDE item. */
export interface DecodedQuery extends DecideQuery {
  namespace: string;
  identifier: string;
  readonly algorithm: { code: number };
  limit: number;
  duration: number;
  cost: number;
  overridable: boolean;
  /** the sender's share of the key's window opened empty (DecideItemFlag.OPENING): a grant may go with the answer */
  opening: boolean;
  charge: boolean;
  /** undefined when the item carries none */
  chargeId: string | undefined;
}

export function newDecodedQuery(): DecodedQuery {
  return {
    namespace: "",
    identifier: "",
    algorithm: { code: 0 },
    limit: 0,
    duration: 0,
    cost: 0,
    overridable: false,
    opening: false,
    charge: false,
    chargeId: undefined,
  };
}
