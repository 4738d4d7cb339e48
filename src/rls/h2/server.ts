import net, { type Server, type Socket } from "node:net";
import tls, { type TlsOptions } from "node:tls";
import { H2Connection } from "./connection.js";
import type { H2Limits, StreamHandler } from "./stream.js";

export interface H2ServerOptions {
  limits: H2Limits;
  /** connections held at once; past it a new one is closed at once */
  maxConnections: number;
  /** a connection that has not sent the preface and its SETTINGS by then (TLS handshake included) is closed */
  prefaceTimeoutMs: number;
  /** a connection without a stream for this long gets GOAWAY and is closed; so is one whose writes stay backed up */
  idleTimeoutMs: number;
  /** set: TLS, with ALPN h2 (a certificate and key, or a secureContext: any tls.createServer options) */
  tls?: TlsOptions;
  /** while it returns true a new connection is refused, as after drain() (GrpcOptions.refusing) */
  refusing?: () => boolean;
}

/** how often timeouts and deadlines are looked at */
const TICK_MS = 50;
/** TLS handshakes in progress beyond the connection cap */
const HANDSHAKES = 64;
/** connections are swept every this many ticks */
const SWEEP_EVERY = 10;

/**
 * A plaintext (prior knowledge) or TLS HTTP/2 listener of H2Connections, and the clocks
 * of its connections and calls: one interval for every preface and idle timeout and every
 * call deadline, not a timer per connection or call.
 */
export class H2Server {
  private readonly server: Server;
  /** set: the TLS listener (its context can be swapped for new connections: setSecureContext) */
  readonly tlsServer: tls.Server | undefined;
  readonly connections = new Set<H2Connection>();
  private ticks = 0;
  private timer: NodeJS.Timeout | undefined;
  private draining = false;

  constructor(
    private readonly options: H2ServerOptions,
    private readonly handler: StreamHandler,
  ) {
    if (options.tls === undefined) {
      this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
    } else {
      // A handshake counts against the preface timeout: one that never ends is closed by it.
      const secure = { ...options.tls, ALPNProtocols: ["h2"], handshakeTimeout: options.prefaceTimeoutMs };
      this.server = this.tlsServer = tls.createServer(secure, (socket) => this.accept(socket));
      this.server.on("tlsClientError", () => {});
    }
    // TLS handshakes come before accept(): a bound on them beside the cap accept() keeps.
    if (options.tls !== undefined) this.server.maxConnections = options.maxConnections + HANDSHAKES;
    this.server.on("error", () => {});
  }

  /** `reusePort`: SO_REUSEPORT, so that several threads each listen on the port (WORKERS > 1) */
  listen(port: number, host: string, reusePort = false): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ port, host, exclusive: true, reusePort }, () => {
        this.server.off("error", reject);
        this.timer = setInterval(() => this.tick(), TICK_MS).unref();
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  private accept(socket: Socket): void {
    if (this.draining || this.options.refusing?.() === true || socket.destroyed) return void socket.destroy(); // destroyed: refused by a check before this one
    if (socket instanceof tls.TLSSocket && socket.alpnProtocol !== "h2" && socket.alpnProtocol !== false) return void socket.destroy();
    socket.setTimeout(0);
    if (this.connections.size >= this.options.maxConnections && !this.evictIdlest()) return void socket.destroy();
    const connection = new H2Connection(socket, this.handler, this.options.limits, (c) => this.connections.delete(c), Date.now());
    this.connections.add(connection);
  }

  /**
   * At the cap, the idlest connection makes room for a new one: one still without its preface
   * first, else the one without a stream that has been quiet longest. Busy connections are
   * never evicted: a port full of them refuses the new one.
   */
  private evictIdlest(): boolean {
    let victim: H2Connection | undefined;
    for (const c of this.connections) {
      if (!c.ready) {
        if (victim === undefined || victim.ready || c.openedAt < victim.openedAt) victim = c;
      } else if (c.streams.size === 0 && (victim === undefined || (victim.ready && c.lastActive < victim.lastActive))) victim = c;
    }
    victim?.destroy();
    return victim !== undefined;
  }

  private tick(): void {
    const now = Date.now();
    // Only open streams are held: a call answered in the read that brought it is never seen here.
    for (const c of this.connections) {
      if (c.streams.size === 0) continue;
      for (const stream of c.streams.values()) {
        if (stream.deadlineAt !== 0 && stream.deadlineAt <= now) {
          stream.deadlineAt = 0;
          this.handler.expired(stream);
        }
      }
    }
    if (++this.ticks % SWEEP_EVERY !== 0) return;
    const { prefaceTimeoutMs, idleTimeoutMs } = this.options;
    for (const c of this.connections) {
      if (!c.ready) {
        if (now - c.openedAt > prefaceTimeoutMs) c.destroy();
      } else if (c.pausedAt !== 0 && now - c.pausedAt > idleTimeoutMs) c.destroy();
      else if (c.streams.size === 0 && now - c.lastActive > idleTimeoutMs) c.goaway();
    }
  }

  /** GOAWAY on every connection: calls in flight are answered, no new one is taken; new connections are refused. */
  drain(): void {
    this.draining = true;
    for (const c of this.connections) c.goaway();
  }

  /** Stops listening; resolves when every connection is gone, closing what is left after `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.drain();
    return new Promise((resolve) => {
      const force = setTimeout(() => {
        for (const c of this.connections) c.destroy();
      }, graceMs);
      force.unref();
      this.server.close(() => {
        clearTimeout(force);
        if (this.timer !== undefined) clearInterval(this.timer);
        resolve();
      });
    });
  }
}
