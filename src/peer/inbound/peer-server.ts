// The listening end of the peer channel: authenticates each connection with
// the handshake, checks the tag of every frame after it, decides DECIDE
// batches with the local handler and answers PING and CALL. Unauthenticated
// connections are bounded overall and per source (admission.ts).

import type net from "node:net";
import { PendingConnections, TlsHandshaking } from "../link/admission.js";
import { PEER_DEFAULTS, idleTimeoutFor } from "../wire/constants.js";
import { secretKey } from "../link/handshake.js";
import { InboundConnection, type ConnectionHost, type PeerServerHandler, type PeerServerStats } from "./inbound-connection.js";
import { NOOP_LOGGER, type PeerLogger } from "../logger.js";
import { DecideBatchReader, DecideReplyWriter, newDecideResult, newDecodedQuery, type DecideResult, type DecodedQuery } from "../wire/messages.js";
import { RefusalLog } from "../link/refusal-log.js";
import { ownRange, type ProtocolRange } from "../link/versions.js";
import { createListener, type PeerSocket, type PeerTlsOptions } from "../link/transport.js";
import type { KeyObject } from "node:crypto";

export type { PeerServerHandler, PeerServerStats };

export interface PeerServerOptions {
  host: string;
  /** 0 picks a free port; listen() resolves with the one chosen. */
  port: number;
  /** CLUSTER_SECRET. */
  secret: string;
  /** This node's id: clients must name it in HELLO (see PeerServer.nodeId to change it). */
  nodeId: string;
  handler: PeerServerHandler;
  tls?: PeerTlsOptions;
  /** ms a new connection has to complete the handshake; default 2 000. */
  handshakeTimeoutMs?: number;
  /** ms between its clients' PINGs (HEARTBEAT_INTERVAL_MS): sets the idle timeout (idleTimeoutFor). */
  heartbeatIntervalMs: number;
  /** ms of silence after which an authenticated connection is closed; default idleTimeoutFor(heartbeatIntervalMs). */
  idleTimeoutMs?: number;
  /** Unauthenticated connections held at once; beyond it the oldest is closed. Default 256. */
  maxPendingHandshakes?: number;
  /** The same from one source address; default 16. */
  maxPendingPerSource?: number;
  logger?: PeerLogger;
  /** the tag each PONG carries (this node's policy version; printable ASCII, at most 64 bytes); default none */
  pongTag?: () => string;
  /** this node's failure domain (ZONE), told to each client in READY; default "" (unset) */
  zone?: string;
  /** called with the item count of every DECIDE frame received (a metric of how well senders batch); default none */
  onDecideFrame?: (items: number) => void;
  /** the protocol versions this node speaks, told to each client that asks (PROTOCOL_CALL); default ownRange() */
  protocol?: ProtocolRange;
  /** this node's members tag, told with its range (protocol-ranges.ts), given the asking client's tag; default none */
  membersTag?: (asked: string) => string;
}

const noTag = (): string => "";
const ignore = (): void => {};

export class PeerServer implements ConnectionHost {
  readonly stats: PeerServerStats = {
    framesReceived: 0,
    decideFrames: 0,
    decideItems: 0,
    decideReads: 0,
    decideErrors: 0,
    decideExpired: 0,
    calls: 0,
    handshakesCompleted: 0,
    connectionsRejected: 0,
    framesRefused: 0,
    pendingEvicted: 0,
  };
  /**
   * This node's id. A HELLO naming another id is refused. Assignable: a node learns its
   * name in the member list only once the list is known.
   */
  nodeId: string;
  /** Refusals by reason, logged as a periodic summary. */
  readonly refusals: RefusalLog;
  /** @internal shared by connections */
  readonly key: KeyObject;
  /** @internal */
  readonly opts: Required<Omit<PeerServerOptions, "tls" | "logger" | "secret" | "nodeId" | "heartbeatIntervalMs">>;
  /** @internal */
  readonly log: PeerLogger;
  /** @internal */
  readonly conns = new Set<InboundConnection>();
  /** @internal unauthenticated connections */
  readonly pending: PendingConnections;
  /** TCP connections in their TLS handshake, by `address:port` (TLS only) */
  private readonly tlsHandshakes: Map<string, TlsHandshaking> | null;
  // One reader and one result object serve every connection: decisions are
  // synchronous, so they are never used by two frames at once.
  /** @internal */
  readonly reader = new DecideBatchReader();
  /** @internal */
  readonly replies = new DecideReplyWriter();
  /** @internal */
  readonly out: DecideResult = newDecideResult();
  /** @internal */
  readonly query: DecodedQuery = newDecodedQuery();
  private readonly server: net.Server;
  private listening = false;

  constructor(opts: PeerServerOptions) {
    this.key = secretKey(opts.secret);
    this.log = opts.logger ?? NOOP_LOGGER;
    this.refusals = new RefusalLog(this.log);
    this.nodeId = opts.nodeId;
    this.opts = {
      host: opts.host,
      port: opts.port,
      handler: opts.handler,
      handshakeTimeoutMs: opts.handshakeTimeoutMs ?? PEER_DEFAULTS.handshakeTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs ?? idleTimeoutFor(opts.heartbeatIntervalMs),
      maxPendingHandshakes: opts.maxPendingHandshakes ?? PEER_DEFAULTS.maxPendingHandshakes,
      maxPendingPerSource: opts.maxPendingPerSource ?? PEER_DEFAULTS.maxPendingPerSource,
      pongTag: opts.pongTag ?? noTag,
      zone: opts.zone ?? "",
      onDecideFrame: opts.onDecideFrame ?? ignore,
      protocol: opts.protocol ?? ownRange(),
      membersTag: opts.membersTag ?? noTag,
    };
    this.pending = new PendingConnections(this.opts.maxPendingHandshakes, this.opts.maxPendingPerSource);
    this.tlsHandshakes = opts.tls === undefined ? null : new Map();
    this.server = createListener(
      opts.tls,
      this.opts.handshakeTimeoutMs,
      (socket) => this.accept(socket),
      (raw) => this.acceptTcpForTls(raw),
    );
  }

  /** Open connections, authenticated or not. */
  get connections(): number {
    return this.conns.size;
  }

  /** Open connections that have not completed the handshake. */
  get pendingHandshakes(): number {
    return this.pending.size;
  }

  /** Start listening; resolves with the bound port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once("error", onError);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.off("error", onError);
        this.server.on("error", (err) => this.log.warn({ err }, "peer listener error"));
        this.listening = true;
        resolve(this.port);
      });
    });
  }

  get port(): number {
    const addr = this.server.address();
    return addr !== null && typeof addr === "object" ? addr.port : 0;
  }

  /** Stop accepting, drop every connection, resolve when the listener is closed. */
  close(): Promise<void> {
    for (const c of [...this.conns]) c.close();
    this.refusals.stop();
    if (!this.listening) return Promise.resolve();
    this.listening = false;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** A connection ready for the peer handshake (plain TCP: just accepted; TLS: TLS done). */
  private accept(socket: PeerSocket): void {
    const source = socket.remoteAddress ?? "";
    if (this.tlsHandshakes === null) {
      this.pending.makeRoom(source);
    } else {
      // Admitted at TCP accept (acceptTcpForTls); its slot passes to the peer handshake.
      const id = `${source}:${socket.remotePort}`;
      const tcp = this.tlsHandshakes.get(id);
      if (tcp !== undefined) {
        this.tlsHandshakes.delete(id);
        this.pending.remove(tcp);
      } else {
        this.pending.makeRoom(source);
      }
    }
    this.conns.add(new InboundConnection(this, socket, source));
  }

  /** TLS only: a TCP connection starting its TLS handshake takes an unauthenticated slot already. */
  private acceptTcpForTls(raw: net.Socket): void {
    const source = raw.remoteAddress ?? "";
    const id = `${source}:${raw.remotePort}`;
    this.pending.makeRoom(source);
    const tcp = new TlsHandshaking(raw, source, (reason) => this.noteRejected(reason, source));
    this.pending.add(tcp);
    this.tlsHandshakes!.set(id, tcp);
    raw.once("close", () => {
      this.pending.remove(tcp);
      if (this.tlsHandshakes!.get(id) === tcp) this.tlsHandshakes!.delete(id);
    });
  }

  /** @internal a connection closed for cause */
  noteRejected(reason: string, source: string): void {
    this.stats.connectionsRejected++;
    if (reason === "evicted") this.stats.pendingEvicted++;
    // An idle timeout of an authenticated peer is routine.
    if (reason !== "idle") this.refusals.note(reason, source);
  }
}
