import { BlockedCache } from "../shard/cluster/routing/blocked-cache.js";
import { ringKeyOf, stateKeyOf } from "../shard/ring/state-key.js";
import { SlugCache } from "../decision.js";
import { cachedBlockAnswer, chargeAnswer, chargeOnce, clientAnswer, NodeAnswer, parseData, reserve, resetAnswer } from "./answer.js";
import { Attempt, Check, CHECK_NAMES, CheckKind, type CheckHandler, type Result } from "./check.js";
import { Deadlines } from "./deadlines.js";
import { Discovery } from "./discovery.js";
import type { NodeConnection } from "./node-connection.js";
import { MemberPolicy } from "./member-policy.js";
import { ClientReporter, consoleLogger, newStats } from "./reporting.js";
import { allowedData, blockedData } from "./validate.js";
import { algorithmByName, DEFAULT_ALGORITHM } from "../algorithms/registry.js";
import type { ClientStats, LimitRequest, LimitResult, RateLimitHeaders, ReleaseRequest, ResetRequest, ResetResult, RingLimitClientOptions } from "./types.js";
import type { ChargeRequest, ChargeResult, Reservation } from "./types.js";
import { CLIENT_DEFAULTS } from "./types.js";
import { acquireOn, type Acquisition } from "./concurrency/acquire.js";

export { CLIENT_DEFAULTS };

/**
 * The ring-aware client of ringlimit (docs/client.md). Each check goes straight to the node
 * owning its key, computed with the nodes' own ring code; the view of the ring comes from
 * GET /cluster and is fetched again when an answer carries another ring version or a node
 * stops answering. A node that cannot be reached is skipped for a while and its checks go
 * to any other node, which forwards them. When no node answers within timeoutMs, limit()
 * resolves with the client's own fail-open answer: it never rejects.
 */
export class RingLimitClient implements CheckHandler {
  private readonly options: Required<Omit<RingLimitClientOptions, "tls" | "urls" | "apiKey" | "logger" | "memberHosts" | "onDegraded">> &
    Pick<RingLimitClientOptions, "tls">;
  private readonly discovery: Discovery;
  private readonly reporter: ClientReporter;
  private rr = 0;
  private readonly deadlines = new Deadlines();
  private readonly blocked = new BlockedCache();
  private readonly slugs = new SlugCache();
  private readonly postHeaders: string[];
  /** checks issued before the first GET /cluster answered, until it does (or discoveryWaitMs passes) */
  private parked: Check[] | undefined = [];
  private parkTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly counters: ClientStats = newStats();

  constructor(options: RingLimitClientOptions) {
    const urls = typeof options.urls === "string" ? [options.urls] : [...options.urls];
    if (urls.length === 0) throw new TypeError("RingLimitClient: at least one URL is needed");
    if (typeof options.apiKey !== "string" || options.apiKey === "") throw new TypeError("RingLimitClient: apiKey is required");
    this.options = {
      timeoutMs: options.timeoutMs ?? CLIENT_DEFAULTS.timeoutMs,
      failOpen: options.failOpen ?? CLIENT_DEFAULTS.failOpen,
      connections: options.connections ?? CLIENT_DEFAULTS.connections,
      routing: options.routing ?? CLIENT_DEFAULTS.routing,
      retryNodeAfterMs: options.retryNodeAfterMs ?? CLIENT_DEFAULTS.retryNodeAfterMs,
      discoveryWaitMs: options.discoveryWaitMs ?? CLIENT_DEFAULTS.discoveryWaitMs,
      failOpenOnAuthError: options.failOpenOnAuthError ?? CLIENT_DEFAULTS.failOpenOnAuthError,
      tls: options.tls,
    };
    if (!(this.options.timeoutMs > 0)) throw new TypeError("RingLimitClient: timeoutMs must be positive");
    if (!(this.options.discoveryWaitMs >= 0)) throw new TypeError("RingLimitClient: discoveryWaitMs must be 0 or more");
    this.postHeaders = ["authorization", "Bearer " + options.apiKey, "content-type", "application/json"];
    const o = this.options;
    this.reporter = new ClientReporter(options.logger ?? consoleLogger, this.counters, o.failOpenOnAuthError, o.failOpen, o.timeoutMs, options.onDegraded);
    const policy = new MemberPolicy(urls, options.memberHosts);
    this.discovery = new Discovery(urls, this.options, ["authorization", "Bearer " + options.apiKey], this.counters, this.reporter, policy);
    // Checks issued before the ring is known wait for it (within discoveryWaitMs), then go to
    // their owners; a check sent to a seed at once would race a cold connection against its
    // deadline, and come back degraded at start (issue 21).
    if (this.options.discoveryWaitMs > 0) {
      this.parkTimer = setTimeout(() => this.releaseParked(), this.options.discoveryWaitMs);
      this.parkTimer.unref();
      this.discovery.whenStarted(() => this.onDiscovered());
    } else {
      this.parked = undefined;
    }
    this.discovery.refresh();
  }

  /** Counters since the client was created. */
  get stats(): ClientStats {
    return { ...this.counters };
  }

  /** The ring version the client routes by ("" until GET /cluster has answered). */
  get ringVersion(): string {
    return this.discovery.view.version;
  }

  /** Check one request against its limit. Never rejects. */
  limit(request: LimitRequest): Promise<LimitResult> {
    this.counters.calls++;
    if (this.closed) return Promise.resolve(this.degraded("unavailable") as LimitResult);
    try {
      const namespace = this.namespaceOf(request);
      const ringKey = ringKeyOf(namespace, request.identifier);
      const code = algorithmByName(request.algorithm ?? DEFAULT_ALGORITHM)?.code;
      // A remembered 429 stands for checks of weight 1 (the default) only, never for slots (a release frees one at once).
      const uncached = code === undefined || request.algorithm === "concurrency" || (request.cost !== undefined && request.cost !== 1);
      const stateKey = uncached ? undefined : stateKeyOf(code, request.duration, ringKey);
      const sentAt = Date.now();
      if (stateKey !== undefined) {
        const block = this.blocked.get(stateKey, request.limit, sentAt);
        if (block !== undefined) {
          this.counters.cachedBlocks++;
          return Promise.resolve(cachedBlockAnswer(request, namespace, sentAt, block.until, block.resetTime));
        }
      }
      return this.start(CheckKind.LIMIT, request, JSON.stringify(request), namespace, ringKey, stateKey, sentAt) as Promise<LimitResult>;
    } catch {
      // Only a request that cannot be serialised gets here (a BigInt, a cycle).
      return Promise.resolve(this.degraded("unavailable") as LimitResult);
    }
  }

  /**
   * POST /limit/batch: all or nothing (docs/api.md). Sent to the owner when every item has
   * the same one, else to any node. Resolves like limit(), with `data.results` per item.
   */
  batch(requests: readonly LimitRequest[]): Promise<LimitResult> {
    this.counters.calls++;
    if (this.closed) return Promise.resolve(this.degraded("unavailable") as LimitResult);
    try {
      const namespaces = requests.map((r) => this.namespaceOf(r));
      const ringKeys = requests.map((r, i) => ringKeyOf(namespaces[i]!, r.identifier));
      return this.start(CheckKind.BATCH, requests[0]!, JSON.stringify({ requests }), namespaces[0]!, ringKeys, undefined, Date.now()) as Promise<LimitResult>;
    } catch {
      return Promise.resolve(this.degraded("unavailable") as LimitResult);
    }
  }

  /** POST /limit/reset, sent to the identifier's owner. Never rejects; `ok` only when the states were removed. */
  reset(request: ResetRequest): Promise<ResetResult> {
    return this.toOwner(CheckKind.RESET, request) as Promise<ResetResult>;
  }

  /** POST /limit/charge to the key's owner (docs/api.md): sent once, or twice with a chargeId when the first answer was lost (chargeOnce). Never rejects. */
  charge(request: ChargeRequest): Promise<ChargeResult> {
    return chargeOnce((body) => this.toOwner(CheckKind.CHARGE, body) as Promise<ChargeResult>, request);
  }

  /** A concurrency slot (docs/client.md): `allowed`, and `release()` to free it (idempotent, never rejects). Fails open as limit(). */
  acquire = (request: Omit<LimitRequest, "algorithm">): Promise<Acquisition> => acquireOn(this, request);

  /** POST /limit/release, sent to the key's owner. Never rejects; `ok` when answered (`data.released`: whether a slot was freed). */
  release = (request: ReleaseRequest): Promise<ResetResult> => this.toOwner(CheckKind.RELEASE, request) as Promise<ResetResult>;

  /** A reset, a charge or a release, to the owner of its identifier; the client's own answer when it cannot be sent. */
  private toOwner(kind: CheckKind, request: ResetRequest | ChargeRequest | ReleaseRequest): Promise<Result> {
    this.counters.calls++;
    if (this.closed) return Promise.resolve(this.degraded("unavailable", kind));
    try {
      const ns = this.namespaceOf(request);
      return this.start(kind, request, JSON.stringify(request), ns, ringKeyOf(ns, request.identifier), undefined, Date.now());
    } catch {
      return Promise.resolve(this.degraded("unavailable", kind));
    }
  }

  /** limit() with an estimated cost, whose settle(actual) charges or refunds the difference (answer.ts). */
  reserve = (request: LimitRequest & { cost: number }): Promise<Reservation> => reserve(this, request);

  private start(
    kind: CheckKind,
    request: LimitRequest | ResetRequest | ChargeRequest | ReleaseRequest,
    body: string,
    namespace: string,
    ringKey: string | readonly string[],
    stateKey: string | undefined,
    sentAt: number,
  ): Promise<Result> {
    return new Promise((resolve) => {
      const check = new Check(this, kind, request, body, namespace, ringKey, stateKey, sentAt, resolve);
      if (this.parked !== undefined) this.parked.push(check);
      else this.launch(check);
    });
  }

  /** Route a check by the view in use, start its deadline and send it. */
  private launch(check: Check): void {
    check.deadline = performance.now() + this.options.timeoutMs;
    check.owner = this.options.routing === "owner" ? this.ownerOf(check.ringKey) : undefined;
    this.deadlines.add(check);
    this.dispatch(check);
  }

  /** The owner of a key, or of every key of a batch when they share one. */
  private ownerOf(ringKey: string | readonly string[]): NodeConnection | undefined {
    const view = this.discovery.view;
    if (typeof ringKey === "string") return view.ownerOf(ringKey);
    let owner: NodeConnection | undefined;
    for (let i = 0; i < ringKey.length; i++) {
      const o = view.ownerOf(ringKey[i]!);
      if (i === 0) owner = o;
      else if (o !== owner) return undefined;
    }
    return owner;
  }

  /**
   * The first GET /cluster ended: the checks that waited go to their owners once a connection
   * to each is open (within discoveryWaitMs), so that no first check pays a connection's
   * set-up inside its own deadline.
   */
  private onDiscovered(): void {
    const parked = this.parked;
    if (parked === undefined) return;
    const owners = new Set<NodeConnection>();
    if (this.options.routing === "owner") {
      for (const check of parked) {
        const owner = this.ownerOf(check.ringKey);
        if (owner !== undefined) owners.add(owner);
      }
    }
    if (owners.size === 0) return this.releaseParked();
    void Promise.all([...owners].map((n) => n.warm(this.options.discoveryWaitMs))).then(() => this.releaseParked());
  }

  /** The first GET /cluster ended (or discoveryWaitMs passed): send the checks that waited for it. */
  private releaseParked(): void {
    const parked = this.parked;
    if (parked === undefined) return;
    this.parked = undefined;
    clearTimeout(this.parkTimer);
    for (const check of parked) {
      if (this.closed) {
        check.settled = true;
        check.resolve(this.degraded("unavailable", check.kind));
      } else {
        this.launch(check);
      }
    }
  }

  /** The effective namespace (README "The request"), with the nodes' own slug code. */
  private namespaceOf(request: { namespace: string; product?: string }): string {
    return request.product === undefined ? request.namespace : request.namespace + "." + this.slugs.get(String(request.product));
  }

  /** Resolve every check in flight with the fail-open answer, close every connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.releaseParked();
    this.deadlines.expireAll();
    await this.discovery.close();
  }

  /** Resolves when the view in use was fetched (or the fetch failed): for tests and start-up. */
  ready(): Promise<void> {
    return this.discovery.ready();
  }

  /** Fetch GET /cluster again (rate-limited; see Discovery). */
  refresh(preferred?: NodeConnection): void {
    this.discovery.refresh(preferred);
  }

  // ------------------------------------------------------------------ checks

  /** Send the check to its next node, or resolve it when none is left. */
  dispatch(check: Check): void {
    const node = this.nextNode(check);
    if (node === undefined) {
      check.settled = true;
      return check.resolve(this.degraded("unavailable", check.kind));
    }
    check.tried.push(node);
    const attempt = new Attempt(this, check, node);
    check.attempt = attempt;
    node.pool.dispatch({ path: node.paths[check.kind], method: "POST", headers: this.postHeaders, body: check.body }, attempt);
  }

  /**
   * The owner first (unless skipped), then the other nodes in turn, then the seeds. When
   * every node is skipped there is none: the check is answered at once rather than waiting
   * on a node known not to answer.
   */
  private nextNode(check: Check): NodeConnection | undefined {
    const now = performance.now();
    if (check.tried.length === 0 && check.owner !== undefined && !check.owner.isSkipped(now)) return check.owner;
    const candidates = this.discovery.view.candidates;
    const n = candidates.length;
    const start = this.rr++;
    for (let i = 0; i < n; i++) {
      const node = candidates[(start + i) % n]!;
      if (!node.isSkipped(now) && !check.tried.includes(node)) return node;
    }
    return undefined;
  }

  onAnswer(attempt: Attempt, status: number, headers: RateLimitHeaders, version: string | undefined, body: Buffer): void {
    const check = attempt.check;
    attempt.node.answered();
    this.reporter.reachable();
    if (version !== undefined && version !== this.discovery.view.version) this.refresh(attempt.node);
    if (status === 401 || status === 403) this.reporter.authFailure(status, attempt.node.url, CHECK_NAMES[check.kind], check.namespace);
    else if (status === 200 || status === 429) this.reporter.accepted();
    if (check.settled) return;
    check.settled = true;
    const source = attempt.node === check.owner ? "owner" : "fallback";
    this.counters[source]++;
    // A refund may end a 429 this client remembers; the cache is only a shortcut.
    if (check.kind === CheckKind.CHARGE && status === 200 && (check.request as ChargeRequest).cost < 0) this.blocked.clear();
    if (check.kind === CheckKind.CHARGE) return check.resolve(chargeAnswer(status, body, headers, source));
    if (check.kind === CheckKind.RESET || check.kind === CheckKind.RELEASE) {
      // A remembered block of a reset identifier no longer stands; the cache is only a shortcut.
      if (status === 200 && check.kind === CheckKind.RESET) this.blocked.clear();
      return check.resolve(resetAnswer(status, parseData(body), source));
    }
    let allowed: boolean;
    let degraded = false;
    if (status === 200) {
      const data = allowedData(body, check.kind === CheckKind.BATCH);
      if (data === undefined) return this.invalid(check, attempt, status, headers, source, body);
      allowed = true;
      degraded = data.degraded === true;
      if (degraded) this.counters.serverDegraded++;
    } else if (status === 429) {
      allowed = false;
      const data = check.stateKey !== undefined ? blockedData(body) : undefined;
      if (data !== undefined) {
        // Remembered no longer than the request's window: nothing blocks a key for longer, and
        // a node's word (retry_after 10^12) must not block it for good in this client.
        const request = check.request as LimitRequest;
        const retryAfterMs = Math.min(Math.floor(data.retry_after * 1000), request.duration * 1000);
        this.blocked.remember(check.stateKey!, request.limit, check.sentAt, retryAfterMs, data.reset_time);
      }
    } else if (status >= 500) {
      // A node failing closed (FAIL_OPEN=false) or a proxy in front of one: the client's own rule applies.
      allowed = this.options.failOpen;
      degraded = true;
      this.counters.serverDegraded++;
    } else if ((status === 401 || status === 403) && this.options.failOpenOnAuthError) {
      // The app chose to admit what the service refuses for the key: allowed, and said to be unchecked.
      allowed = true;
      degraded = true;
    } else {
      // A request the service refused (400, 401, 403, 413, 415): never allowed, or a caller could skip its limit with a bad one.
      allowed = false;
    }
    check.resolve(new NodeAnswer(allowed, degraded, status, headers, source, body));
  }

  /** A 200 that is not an allowed decision (an HTML page, an empty body, `allowed: false`): not believed, the client's own rule applies. */
  private invalid(check: Check, attempt: Attempt, status: number, headers: RateLimitHeaders, source: "owner" | "fallback", body: Buffer): void {
    this.counters.invalidAnswers++;
    this.reporter.distrust(
      "answer:" + attempt.node.url,
      { node: attempt.node.url, status, request: CHECK_NAMES[check.kind] },
      `a node answered ${status} with a body that is not a ringlimit decision: not believed (answered as failOpen, degraded)`,
    );
    check.resolve(new NodeAnswer(this.options.failOpen, true, status, headers, source, body));
  }

  onFailure(attempt: Attempt): void {
    const check = attempt.check;
    if (attempt.aborted) return; // our own abort after the deadline
    this.counters.connectionErrors++;
    attempt.node.failed(performance.now());
    this.refresh();
    if (check.settled) return;
    // A charge whose exchange failed may have reached its node: never sent again (counted at most once).
    if (check.kind === CheckKind.CHARGE) return void ((check.settled = true), check.resolve(chargeAnswer(0, undefined, {}, "client")));
    this.dispatch(check);
  }

  onExpired(check: Check): void {
    check.settled = true;
    const attempt = check.attempt;
    if (attempt !== undefined) {
      // A node that answered anything since this attempt was sent is up: what it is waiting
      // for is another node, the owner it forwards to (with a timeoutMs below the servers'
      // PEER_TIMEOUT_MS). Only a node silent for the whole attempt is skipped.
      const now = performance.now();
      if (!attempt.node.answeredSince(attempt.sentAt)) attempt.node.failed(now);
      attempt.abort();
    }
    this.refresh();
    check.resolve(this.degraded("timeout", check.kind));
  }

  /** No node answered: the client's own answer (a reset cannot fail open: not ok). */
  private degraded(why: "timeout" | "unavailable", kind: CheckKind = CheckKind.LIMIT): Result {
    this.counters.degraded++;
    this.counters[why === "timeout" ? "timeouts" : "unavailable"]++;
    if (!this.closed) this.reporter.unreachable(why);
    if (kind === CheckKind.RESET || kind === CheckKind.RELEASE) return resetAnswer(0, undefined, "client");
    return kind === CheckKind.CHARGE ? chargeAnswer(0, undefined, {}, "client") : clientAnswer(this.options.failOpen);
  }
}
