import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js";
import { App, SSLApp, us_listen_socket_close } from "./uws.js";
import type { Decider } from "../decision.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { BearerSecret, type ApiKeyVerifier } from "../auth/api-keys.js";
import { HttpDoor } from "./door.js";
import type { AnyEndpoint } from "./endpoint.js";
import { batchEndpoint } from "./endpoints/batch.js";
import { clusterEndpoint, type RingDirectory } from "./endpoints/cluster.js";
import { topEndpoint, type TopQuery, type TopResult } from "./endpoints/top.js";
import { serveHealth } from "./endpoints/health.js";
import { jsonEndpoint, type RlsDecisions } from "./endpoints/json.js";
import { limitEndpoint } from "./endpoints/limit.js";
import { chargeEndpoint } from "./endpoints/charge.js";
import { resetEndpoint } from "./endpoints/reset.js";
import { releaseEndpoint } from "./endpoints/release.js";
import { processLeaseTokens, type LeaseTokens } from "../leases/lease-token.js";
import { errorBody } from "./envelope.js";
import { endWithError, Errors, type ErrorDef } from "./errors.js";
import type { IdGenerator } from "./ids.js";
import { listenExclusive } from "./listen.js";

export type { RingDirectory } from "./endpoints/cluster.js";

/**
 * The routes of the decision endpoints: adding a front door is a file in endpoints/ and a
 * line here (docs/architecture.md, Adding an endpoint).
 */
const POST_ENDPOINTS: readonly AnyEndpoint[] = [limitEndpoint, batchEndpoint, resetEndpoint, chargeEndpoint];

export interface FrontEndOptions {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  /** serve /metrics on this port instead of the main one */
  metricsPort?: number;
  /** when set, /metrics requires `Authorization: Bearer <metricsToken>` */
  metricsToken?: string;
  failOpen: boolean;
}

/** The settings a front end reads (Config has them), as its options: one mapping for the main thread and every worker. */
export function frontEndOptionsOf(c: {
  host: string;
  port: number;
  failOpen: boolean;
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  metricsPort?: number | undefined;
  metricsToken?: string | undefined;
}): FrontEndOptions {
  return {
    host: c.host,
    port: c.port,
    failOpen: c.failOpen,
    ...(c.tlsCertFile !== undefined && c.tlsKeyFile !== undefined ? { tls: { certFile: c.tlsCertFile, keyFile: c.tlsKeyFile } } : {}),
    ...(c.metricsPort !== undefined ? { metricsPort: c.metricsPort } : {}),
    ...(c.metricsToken !== undefined ? { metricsToken: c.metricsToken } : {}),
  };
}

export interface FrontEndDeps {
  decider: Decider;
  verifier: ApiKeyVerifier;
  ids: IdGenerator;
  metrics: Metrics;
  logger: Logger;
  /** whether this node can serve decisions (ring known); /ready reflects it */
  isReady: () => boolean;
  /** why it is not (the body of a 503 on /ready); unset or undefined: no reason to give */
  notReadyReason?: () => string | undefined;
  /**
   * A worker thread (WORKERS > 1): whether the node's drain has begun, which /ready says
   * before this thread's own startDraining() has run (the owner's word comes first).
   */
  nodeDraining?: () => boolean;
  /** the ring as clients see it: GET /cluster and the ring-version header */
  directory: RingDirectory;
  clock?: () => number;
  /** GET /top: the identifiers blocked most, merged across the ring (docs/api.md); unset: no /top route */
  top?: (q: TopQuery) => Promise<TopResult>;
  /** the RLS service behind POST /json (docs/envoy.md); unset: no /json route */
  rls?: RlsDecisions;
  /** whether GET /healthcheck may answer 200 as far as the policy goes (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED) */
  policyLoaded?: () => boolean;
  /** concurrency leases, keyed from CLUSTER_SECRET (leases/lease-token.ts); unset: this process's own key */
  leases?: LeaseTokens;
  /** the /metrics text; unset: `metrics.render()` (a worker thread asks the state owner, which sums every thread's) */
  renderMetrics?: () => Promise<string>;
}

/** uWS's acceptor API (addChildAppDescriptor), at run time in both builds, missing from the typings. */
interface AcceptorApp {
  getDescriptor(): unknown;
  addChildAppDescriptor(descriptor: unknown): void;
  removeChildAppDescriptor(descriptor: unknown): void;
}

/**
 * The uWebSockets.js front end: the apps, their routes and their lifecycle. A POST goes to
 * the HTTP door (door.ts: auth, Content-Type, size, JSON), then through the decision
 * pipeline (pipeline.ts) to its endpoint (endpoints/). It knows nothing of where a decision
 * comes from: that is the Decider's business.
 */
export class FrontEnd {
  private readonly app: TemplatedApp;
  private adminApp: TemplatedApp | undefined;
  private listenSockets: us_listen_socket[] = [];
  private draining = false;
  private readonly door: HttpDoor;
  private readonly clock: () => number;
  private readonly metricsBearer: BearerSecret | undefined;

  constructor(
    private readonly options: FrontEndOptions,
    private readonly deps: FrontEndDeps,
  ) {
    this.clock = deps.clock ?? Date.now;
    deps.leases ??= processLeaseTokens();
    this.door = new HttpDoor(deps, options.failOpen, this.clock);
    this.metricsBearer = options.metricsToken !== undefined ? new BearerSecret(options.metricsToken) : undefined;
    this.app = options.tls !== undefined ? SSLApp({ cert_file_name: options.tls.certFile, key_file_name: options.tls.keyFile }) : App();
    const app = this.app;
    const door = this.door;
    const endpoints = [...POST_ENDPOINTS, releaseEndpoint(deps.leases), ...(deps.rls === undefined ? [] : [jsonEndpoint(deps.rls)])];
    for (const endpoint of endpoints) {
      app.post(endpoint.path, (res, req) => door.onPost(res, req, endpoint));
      app.any(endpoint.path, (res) => this.endError(res, Errors.methodNotAllowed, "POST"));
    }
    app.get("/cluster", clusterEndpoint(deps.verifier, deps.ids, this.clock, deps.directory));
    if (deps.top !== undefined) app.get("/top", topEndpoint(deps.verifier, deps.ids, this.clock, deps.top));
    app.any("/top", (res) => this.endError(res, Errors.methodNotAllowed, "GET"));
    app.any("/cluster", (res) => this.endError(res, Errors.methodNotAllowed, "GET"));
    const readiness = () => (this.draining || deps.nodeDraining?.() === true ? "draining" : this.deps.isReady() ? "ready" : "not ready");
    serveHealth(app, readiness, deps.policyLoaded, deps.notReadyReason);
    if (options.metricsPort === undefined) {
      app.get("/metrics", (res, req) => this.onMetrics(res, req));
    } else {
      // The admin port is plain HTTP even when the main one is TLS, and answers /health and
      // /ready too: Kubernetes probes and Prometheus reach it without certificates.
      this.adminApp = App().get("/metrics", (res, req) => this.onMetrics(res, req));
      serveHealth(this.adminApp, readiness, deps.policyLoaded, deps.notReadyReason);
      this.adminApp.any("/*", (res) => this.endError(res, Errors.notFound));
    }
    app.any("/*", (res) => this.endError(res, Errors.notFound));
  }

  /** POST requests received and not answered yet: a drain waits for 0. */
  get inFlight(): number {
    return this.door.pipeline.inFlight;
  }

  /** Resolves with the bound ports (main, admin). */
  async listen(): Promise<{ port: number; metricsPort?: number }> {
    const [socket, port] = await listenExclusive(this.app, "http", this.options.host, this.options.port);
    this.listenSockets.push(socket);
    if (this.adminApp === undefined) return { port };
    const [adminSocket, metricsPort] = await listenExclusive(this.adminApp, "metrics", this.options.host, this.options.metricsPort!);
    this.listenSockets.push(adminSocket);
    return { port, metricsPort };
  }

  /** /ready turns 503; requests already accepted keep being served. */
  startDraining(): void {
    this.draining = true;
  }

  /** Stop accepting connections; open keep-alive connections are closed by close(). */
  stopListening(): void {
    for (const s of this.listenSockets) us_listen_socket_close(s);
    this.listenSockets = [];
  }

  /**
   * WORKERS > 1 (docs/architecture.md, Threads): this app, in a worker thread, serves the
   * connections the state owner's listening app accepts and hands it by this descriptor.
   */
  descriptor(): unknown {
    return (this.app as unknown as AcceptorApp).getDescriptor();
  }

  /** Hand the connections this app accepts to a worker's app, round robin over those added. */
  addChild(descriptor: unknown): void {
    (this.app as unknown as AcceptorApp).addChildAppDescriptor(descriptor);
  }

  /** A worker stopped: no more connections go to it (with none left, this app serves them itself). */
  removeChild(descriptor: unknown): void {
    (this.app as unknown as AcceptorApp).removeChildAppDescriptor(descriptor);
  }

  close(): void {
    this.stopListening();
    this.app.close();
    this.adminApp?.close();
  }

  private endError(res: HttpResponse, error: ErrorDef, allow?: string): void {
    endWithError(res, error, errorBody(this.deps.ids.error(), this.clock(), error), allow);
  }

  private onMetrics(res: HttpResponse, req: HttpRequest): void {
    if (this.metricsBearer !== undefined && !this.metricsBearer.matches(req.getHeader("authorization"))) {
      return this.endError(res, Errors.unauthorized);
    }
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const metrics = this.deps.metrics;
    (this.deps.renderMetrics ?? (() => metrics.render()))().then(
      (body) => {
        if (!aborted) res.cork(() => res.writeStatus("200 OK").writeHeader("Content-Type", metrics.contentType).end(body));
      },
      (err: unknown) => {
        this.deps.logger.error({ err }, "metrics failed");
        if (!aborted) res.cork(() => this.endError(res, Errors.internal));
      },
    );
  }
}
