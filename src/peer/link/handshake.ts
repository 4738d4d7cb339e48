// The handshake that opens every peer connection (docs/peer-protocol.md).
//
//   client → HELLO(version, nonceC, clientId, serverId)   serverId: the member it dialed
//   server → CHALLENGE(nonceS, serverProof)                only if serverId is its own id
//   client → PROOF(clientProof)
//   server → READY                                         the first sealed frame
//
// Everything is derived from one HKDF-SHA256 over the cluster key (CLUSTER_SECRET
// stretched once by scrypt: cluster-secret.ts), salted with both nonces, whose info is
// the transcript
//   "ringlimit peer protocol 3" ‖ u16 len ‖ clientId ‖ u16 len ‖ serverId ‖ nonceC ‖ nonceS
// and whose 128 bytes of output are, in order: serverProof, clientProof, the
// client→server frame key and the server→client frame key. So a proof holds
// only for this pair of nodes, in this direction, on this connection:
//  - relayed to another node, it was made for a different serverId (and that
//    node refuses a HELLO naming someone else before it answers at all);
//  - reflected back to the node that made it (its own proof opening its own
//    server), the roles are swapped, so the transcript differs; and a server
//    refuses a client claiming the server's own id;
//  - a server's proof is never a client's: they are different output bytes.
// The secret never crosses the wire, and the frame keys never do either. A CHALLENGE
// still lets its recipient test guesses of the secret offline (anyone may send a HELLO);
// the scrypt in front of HKDF makes each guess cost what the node pays once at start-up.

import { createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto";
import { FrameType, MAC_BYTES, MAX_ZONE_BYTES, NONCE_BYTES, PROTOCOL_MIN, PROTOCOL_VERSION, TRANSCRIPT_LABEL } from "../wire/constants.js";
import { FrameError } from "../errors.js";
import { encodeFrame } from "../wire/frame.js";
import { decodeChallenge, decodeHello, decodeProof, encodeChallenge, encodeHello, encodeProof, nodeIdBytes } from "../wire/messages.js";
import { clusterKey } from "./cluster-secret.js";
import { FrameOpener, FrameSealer, type Session } from "./session.js";

const LABEL = Buffer.from(TRANSCRIPT_LABEL, "utf8");
const KEY_BYTES = 32;

/** The cluster key (clusterKey: the secret stretched by scrypt, once per secret in a process) as a key object. */
export function secretKey(secret: string): KeyObject {
  if (typeof secret !== "string" || secret.length === 0) throw new TypeError("peer channel needs a non-empty secret");
  return createSecretKey(clusterKey(secret));
}

/** What one handshake derives; both sides compute the same. */
export interface HandshakeSecrets {
  serverProof: Buffer;
  clientProof: Buffer;
  clientToServer: KeyObject;
  serverToClient: KeyObject;
}

/** The transcript both sides bind: who calls whom, and both nonces. */
export function transcript(clientId: string, serverId: string, nonceC: Buffer, nonceS: Buffer): Buffer {
  const c = nodeIdBytes(clientId);
  const s = nodeIdBytes(serverId);
  return Buffer.concat([LABEL, u16(c.length), c, u16(s.length), s, nonceC, nonceS]);
}

function u16(n: number): Buffer {
  const b = Buffer.allocUnsafe(2);
  b.writeUInt16BE(n, 0);
  return b;
}

export function deriveSecrets(key: KeyObject, clientId: string, serverId: string, nonceC: Buffer, nonceS: Buffer): HandshakeSecrets {
  const salt = Buffer.concat([nonceC, nonceS]);
  const out = Buffer.from(hkdfSync("sha256", key, salt, transcript(clientId, serverId, nonceC, nonceS), 2 * MAC_BYTES + 2 * KEY_BYTES));
  return {
    serverProof: out.subarray(0, MAC_BYTES),
    clientProof: out.subarray(MAC_BYTES, 2 * MAC_BYTES),
    clientToServer: createSecretKey(out.subarray(2 * MAC_BYTES, 2 * MAC_BYTES + KEY_BYTES)),
    serverToClient: createSecretKey(out.subarray(2 * MAC_BYTES + KEY_BYTES)),
  };
}

/** Constant-time comparison of a received proof with the expected one. */
export function proofMatches(expected: Buffer, received: Buffer): boolean {
  return received.length === MAC_BYTES && expected.length === MAC_BYTES && timingSafeEqual(expected, received);
}

/** Raised when the other side fails to prove the secret, names the wrong node, or breaks the handshake order. */
export class HandshakeError extends Error {
  /** A short stable reason, for counting refusals without logging each one. */
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = "HandshakeError";
    this.reason = reason;
  }
}

/** Server side: feed it the frames received before the connection is authenticated. */
export class ServerHandshake {
  remoteNodeId = "";
  /** Set once the client's proof is accepted; READY must then be sent sealed with it. */
  session: Session | null = null;
  private secrets: HandshakeSecrets | null = null;

  constructor(
    private readonly key: KeyObject,
    private readonly nodeId: string,
  ) {}

  /**
   * Returns true once the client has proven the secret; the caller then seals and
   * sends READY with `session`. Throws HandshakeError or FrameError on anything unexpected.
   */
  receive(type: number, body: Buffer, send: (frame: Buffer) => void): boolean {
    if (this.secrets === null) {
      if (type !== FrameType.HELLO) throw new HandshakeError("order", `expected HELLO, got frame type ${type}`);
      const hello = decodeHello(body);
      // Older than 11, the handshake had other frames: a node this build cannot speak to at all.
      // Newer versions keep these frames, so any version from 11 up goes on to the ranges.
      if (hello.version < PROTOCOL_MIN) {
        throw new HandshakeError(
          `protocol_${hello.version}`,
          `HELLO of protocol ${hello.version}: this node speaks ${PROTOCOL_MIN}..${PROTOCOL_VERSION} (a node that old cannot join; upgrade it to a release of protocol ${PROTOCOL_MIN} first)`,
        );
      }
      if (hello.serverNodeId !== this.nodeId) {
        throw new HandshakeError("wrong_node", `client dialed node ${JSON.stringify(hello.serverNodeId)}, this is ${JSON.stringify(this.nodeId)}`);
      }
      if (hello.clientNodeId === this.nodeId) throw new HandshakeError("reflected", "client claims this node's own id");
      const nonceS = randomBytes(NONCE_BYTES);
      this.remoteNodeId = hello.clientNodeId;
      this.secrets = deriveSecrets(this.key, hello.clientNodeId, this.nodeId, hello.nonce, nonceS);
      send(encodeChallenge(nonceS, this.secrets.serverProof));
      return false;
    }
    if (type !== FrameType.PROOF) throw new HandshakeError("order", `expected PROOF, got frame type ${type}`);
    if (!proofMatches(this.secrets.clientProof, decodeProof(body))) {
      throw new HandshakeError("bad_proof", "client proof does not match the cluster secret and this handshake");
    }
    this.session = { sealer: new FrameSealer(this.secrets.serverToClient), opener: new FrameOpener(this.secrets.clientToServer) };
    return true;
  }
}

/** The READY frame, unsealed (seal it with the session's sealer): it carries the server's zone (ZONE; "" when unset). */
export function readyFrame(zone = ""): Buffer {
  return encodeFrame(FrameType.READY, Buffer.from(zone, "utf8"));
}

/** Client side: start() gives the HELLO, then feed it the frames received before READY. */
export class ClientHandshake {
  /** Set once the server's proof is accepted: frames from then on (READY first) are sealed. */
  session: Session | null = null;
  /** The server's zone (ZONE), from its READY; "" when it set none. */
  remoteZone = "";
  private readonly nonceC = randomBytes(NONCE_BYTES);

  /**
   * @param nodeId this node's id
   * @param serverNodeId the id of the node this client dials: any other is refused
   */
  constructor(
    private readonly key: KeyObject,
    private readonly nodeId: string,
    readonly serverNodeId: string,
  ) {}

  start(): Buffer {
    return encodeHello(this.nonceC, this.nodeId, this.serverNodeId);
  }

  /**
   * Returns true on READY. Throws HandshakeError or FrameError on anything unexpected.
   * After the CHALLENGE is accepted, `session` is set and the caller must open every
   * later frame with its opener (READY included).
   */
  receive(type: number, body: Buffer, send: (frame: Buffer) => void): boolean {
    if (this.session === null) {
      if (type !== FrameType.CHALLENGE) throw new HandshakeError("order", `expected CHALLENGE, got frame type ${type}`);
      const ch = decodeChallenge(body);
      const secrets = deriveSecrets(this.key, this.nodeId, this.serverNodeId, this.nonceC, ch.nonce);
      if (!proofMatches(secrets.serverProof, ch.proof)) {
        throw new HandshakeError("bad_proof", `server proof does not match the cluster secret and node ${JSON.stringify(this.serverNodeId)}`);
      }
      this.session = { sealer: new FrameSealer(secrets.clientToServer), opener: new FrameOpener(secrets.serverToClient) };
      send(encodeProof(secrets.clientProof));
      return false;
    }
    if (type !== FrameType.READY) throw new HandshakeError("order", `expected READY, got frame type ${type}`);
    if (body.length > MAX_ZONE_BYTES) throw new FrameError(`READY zone of ${body.length} bytes exceeds ${MAX_ZONE_BYTES}`);
    this.remoteZone = body.toString("utf8");
    return true;
  }
}
