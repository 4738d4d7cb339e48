// The HMAC nonce handshake that opens every peer connection.
//
//   client → HELLO(nonceC, clientNodeId)
//   server → CHALLENGE(nonceS, serverNodeId, HMAC(secret, "ringlimit/server" ‖ nonceC ‖ nonceS))
//   client → PROOF(HMAC(secret, "ringlimit/client" ‖ nonceS ‖ nonceC))
//   server → READY
//
// The secret never crosses the wire. Both sides contribute a fresh 32-byte
// nonce, so a recorded proof is useless on another connection, and the two
// directions use different labels, so a server's proof cannot be reflected
// back as a client's. Without TLS this authenticates the opening only: an
// attacker on the path could still inject into an established connection,
// which is what the `tls` option is for.

import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto";
import { CLIENT_PROOF_LABEL, FrameType, MAC_BYTES, NONCE_BYTES, SERVER_PROOF_LABEL } from "./constants.js";
import { encodeFrame } from "./frame.js";
import { decodeChallenge, decodeHello, decodeProof, encodeChallenge, encodeHello, encodeProof, expectEmpty } from "./messages.js";

const SERVER_LABEL = Buffer.from(SERVER_PROOF_LABEL, "utf8");
const CLIENT_LABEL = Buffer.from(CLIENT_PROOF_LABEL, "utf8");

/** The cluster secret as a key object, made once per server or client. */
export function secretKey(secret: string): KeyObject {
  if (typeof secret !== "string" || secret.length === 0) throw new TypeError("peer channel needs a non-empty secret");
  return createSecretKey(Buffer.from(secret, "utf8"));
}

export function serverProof(key: KeyObject, nonceC: Buffer, nonceS: Buffer): Buffer {
  return createHmac("sha256", key).update(SERVER_LABEL).update(nonceC).update(nonceS).digest();
}

export function clientProof(key: KeyObject, nonceC: Buffer, nonceS: Buffer): Buffer {
  return createHmac("sha256", key).update(CLIENT_LABEL).update(nonceS).update(nonceC).digest();
}

/** Constant-time comparison of a received proof with the expected one. */
export function proofMatches(expected: Buffer, received: Buffer): boolean {
  return received.length === MAC_BYTES && expected.length === MAC_BYTES && timingSafeEqual(expected, received);
}

/** Raised when the other side fails to prove the secret or breaks the handshake order. */
export class HandshakeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HandshakeError";
  }
}

/** Server side: feed it the frames received before READY. */
export class ServerHandshake {
  remoteNodeId = "";
  private nonceC: Buffer | null = null;
  private nonceS: Buffer | null = null;

  constructor(
    private readonly key: KeyObject,
    private readonly nodeId: string,
  ) {}

  /**
   * Returns true once the client has proven the secret (READY has then been
   * sent). Throws HandshakeError or FrameError on anything unexpected.
   */
  receive(type: number, body: Buffer, send: (frame: Buffer) => void): boolean {
    if (this.nonceC === null) {
      if (type !== FrameType.HELLO) throw new HandshakeError(`expected HELLO, got frame type ${type}`);
      const hello = decodeHello(body);
      this.nonceC = hello.nonce;
      this.remoteNodeId = hello.nodeId;
      this.nonceS = randomBytes(NONCE_BYTES);
      send(encodeChallenge(this.nonceS, serverProof(this.key, this.nonceC, this.nonceS), this.nodeId));
      return false;
    }
    if (type !== FrameType.PROOF) throw new HandshakeError(`expected PROOF, got frame type ${type}`);
    const proof = decodeProof(body);
    if (!proofMatches(clientProof(this.key, this.nonceC, this.nonceS!), proof)) {
      throw new HandshakeError("client proof does not match the cluster secret");
    }
    send(encodeFrame(FrameType.READY));
    return true;
  }
}

/** Client side: start() gives the HELLO, then feed it the frames received before READY. */
export class ClientHandshake {
  remoteNodeId = "";
  private readonly nonceC = randomBytes(NONCE_BYTES);
  private proved = false;

  constructor(
    private readonly key: KeyObject,
    private readonly nodeId: string,
  ) {}

  start(): Buffer {
    return encodeHello(this.nonceC, this.nodeId);
  }

  /** Returns true on READY. Throws HandshakeError or FrameError on anything unexpected. */
  receive(type: number, body: Buffer, send: (frame: Buffer) => void): boolean {
    if (!this.proved) {
      if (type !== FrameType.CHALLENGE) throw new HandshakeError(`expected CHALLENGE, got frame type ${type}`);
      const ch = decodeChallenge(body);
      if (!proofMatches(serverProof(this.key, this.nonceC, ch.nonce), ch.mac)) {
        throw new HandshakeError("server proof does not match the cluster secret");
      }
      this.remoteNodeId = ch.nodeId;
      this.proved = true;
      send(encodeProof(clientProof(this.key, this.nonceC, ch.nonce)));
      return false;
    }
    if (type !== FrameType.READY) throw new HandshakeError(`expected READY, got frame type ${type}`);
    expectEmpty(body, "READY");
    return true;
  }
}
