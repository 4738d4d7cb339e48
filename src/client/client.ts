import { BlockedCache } from "../shard/cluster/routing/blocked-cache.js";
import { HashRing } from "../shard/ring/ring.js";
import { ringKeyOf, stateKeyOf } from "../shard/ring/state-key.js";
import { SlugCache } from "../decision.js";
import { cachedBlockAnswer, clientAnswer, NodeAnswer, parseData, resetAnswer } from "./answer.js";
import { Attempt, Check, CheckKind, type CheckHandler, type Result } from "./check.js";
import { Deadlines } from "./deadlines.js";
import { NodeConnection, normaliseUrl } from "./node-connection.js";
import { parseClusterAnswer, RingView, type ClusterAnswer } from "./ring-view.js";
import { algorithmByName, DEFAULT_ALGORITHM } from "../algorithms/registry.js";
import type { ClientStats, LimitRequest, LimitResult, RateLimitHeaders, ResetRequest, ResetResult, RingLimitClientOptions } from "./types.js";

/** Defaults of RingLimitClientOptions, in one place. */
export const CLIENT_DEFAULTS = Object.freeze({
  timeoutMs: 50, // ms: a check unanswered by then resolves allowed: failOpen, degraded: true
  failOpen: true,
  connections: 16, // keep-alive connections per node
  routing: "owner" as "owner" | "round-robin",
  retryNodeAfterMs: 1000, // ms an unreachable node is skipped (doubling while it stays so, up to 5 s)
});

/** GET /cluster is fetched at most this often, however many answers disagree with the client's ring. */
const REFRESH_MIN_INTERVAL_MS = 100;
/** Deadline of one GET /cluster (cold path, off the checks' path). */
const REFRESH_TIMEOUT_MS = 2000;

/**
 * The ring-aware client of ringlimit (docs/client.md). Each check goes straight to the node
 * owning its key, computed with the nodes' own ring code; the view of the ring comes from
 * GET /cluster and is fetched again when an answer carries another ring version or a node
 * stops answering. A node that cannot be reached is skipped for a while and its checks go
 * to any other node, which forwards them. When no node answers within timeoutMs, limit()
 * resolves with the client's own fail-open answer: it never rejects.
 */
export class RingLimitClient implements CheckHandler {
  private readonly options: Required<Omit<RingLimitClientOptions, "tls" | "urls" | "apiKey">> & Pick<RingLimitClientOptions, "tls">;
  private readonly seeds: NodeConnection[];
  private readonly nodes = new Map<string, NodeConnection>();
  private view: RingView;
  private rr = 0;
  private readonly deadlines = new Deadlines();
  private readonly blocked = new BlockedCache();
  private readonly slugs = new SlugCache();
  private readonly postHeaders: string[];
  private readonly getHeaders: string[];
  private refreshing: Promise<void> | undefined;
  private lastRefreshAt = -Infinity;
  private refreshTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly counters: ClientStats = {
    calls: 0,
    owner: 0,
    fallback: 0,
    cachedBlocks: 0,
    degraded: 0,
    timeouts: 0,
    unavailable: 0,
    serverDegraded: 0,
    connectionErrors: 0,
    refreshes: 0,
    refreshFailures: 0,
  };

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
      tls: options.tls,
    };
    if (!(this.options.timeoutMs > 0)) throw new TypeError("RingLimitClient: timeoutMs must be positive");
    this.postHeaders = ["authorization", "Bearer " + options.apiKey, "content-type", "application/json"];
    this.getHeaders = ["authorization", "Bearer " + options.apiKey];
    this.seeds = [...new Set(urls.map(normaliseUrl))].map((u) => this.node(u));
    // Until the ring is known, checks go to the seeds, which forward to owners.
    this.view = new RingView("", new HashRing([]), new Map(), this.seeds);
    this.refresh();
  }

  /** Counters since the client was created. */
  get stats(): ClientStats {
    return { ...this.counters };
  }

  /** The ring version the client routes by ("" until GET /cluster has answered). */
  get ringVersion(): string {
    return this.view.version;
  }

  /** Check one request against its limit. Never rejects. */
  limit(request: LimitRequest): Promise<LimitResult> {
    this.counters.calls++;
    if (this.closed) return Promise.resolve(this.degraded("unavailable") as LimitResult);
    try {
      const namespace = this.namespaceOf(request);
      const ringKey = ringKeyOf(namespace, request.identifier);
      const code = algorithmByName(request.algorithm ?? DEFAULT_ALGORITHM)?.code;
      // A remembered 429 stands for checks of weight 1 (the default) only.
      const stateKey = code === undefined || (request.cost !== undefined && request.cost !== 1) ? undefined : stateKeyOf(code, request.duration, ringKey);
      const sentAt = Date.now();
      if (stateKey !== undefined) {
        const block = this.blocked.get(stateKey, request.limit, sentAt);
        if (block !== undefined) {
          this.counters.cachedBlocks++;
          return Promise.resolve(cachedBlockAnswer(request, namespace, sentAt, block.until, block.resetTime));
        }
      }
      const owner = this.options.routing === "owner" ? this.view.ownerOf(ringKey) : undefined;
      return this.start(CheckKind.LIMIT, request, JSON.stringify(request), stateKey, sentAt, owner) as Promise<LimitResult>;
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
      let owner: NodeConnection | undefined;
      if (this.options.routing === "owner") {
        for (let i = 0; i < requests.length; i++) {
          const r = requests[i]!;
          const o = this.view.ownerOf(ringKeyOf(this.namespaceOf(r), r.identifier));
          if (i === 0) owner = o;
          else if (o !== owner) {
            owner = undefined;
            break;
          }
        }
      }
      return this.start(CheckKind.BATCH, requests[0]!, JSON.stringify({ requests }), undefined, Date.now(), owner) as Promise<LimitResult>;
    } catch {
      return Promise.resolve(this.degraded("unavailable") as LimitResult);
    }
  }

  /** POST /limit/reset, sent to the identifier's owner. Never rejects; `ok` only when the states were removed. */
  reset(request: ResetRequest): Promise<ResetResult> {
    this.counters.calls++;
    if (this.closed) return Promise.resolve(this.degraded("unavailable", CheckKind.RESET) as ResetResult);
    try {
      const owner = this.options.routing === "owner" ? this.view.ownerOf(ringKeyOf(this.namespaceOf(request), request.identifier)) : undefined;
      return this.start(CheckKind.RESET, request, JSON.stringify(request), undefined, Date.now(), owner) as Promise<ResetResult>;
    } catch {
      return Promise.resolve(this.degraded("unavailable", CheckKind.RESET) as ResetResult);
    }
  }

  private start(
    kind: CheckKind,
    request: LimitRequest | ResetRequest,
    body: string,
    stateKey: string | undefined,
    sentAt: number,
    owner: NodeConnection | undefined,
  ): Promise<Result> {
    return new Promise((resolve) => {
      const check = new Check(this, kind, request, body, stateKey, sentAt, performance.now() + this.options.timeoutMs, owner, resolve);
      this.deadlines.add(check);
      this.dispatch(check);
    });
  }

  /** The effective namespace (README "The request"), with the nodes' own slug code. */
  private namespaceOf(request: { namespace: string; product?: string }): string {
    return request.product === undefined ? request.namespace : request.namespace + "." + this.slugs.get(String(request.product));
  }

  /** Resolve every check in flight with the fail-open answer, close every connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.refreshTimer);
    this.deadlines.expireAll();
    await Promise.all([...this.nodes.values()].map((n) => n.close()));
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
    const candidates = this.view.candidates;
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
    if (version !== undefined && version !== this.view.version) this.refresh(attempt.node);
    if (check.settled) return;
    check.settled = true;
    const source = attempt.node === check.owner ? "owner" : "fallback";
    this.counters[source]++;
    if (check.kind === CheckKind.RESET) {
      // A remembered block of a reset identifier no longer stands; the cache is only a shortcut.
      if (status === 200) this.blocked.clear();
      return check.resolve(resetAnswer(status, parseData(body), source));
    }
    let allowed: boolean;
    let degraded = false;
    if (status === 200) {
      allowed = true;
      // Safe on the raw text: inside a JSON string a quote is always escaped.
      degraded = body.indexOf('"degraded":true') >= 0;
      if (degraded) this.counters.serverDegraded++;
    } else if (status === 429) {
      allowed = false;
      if (check.stateKey !== undefined) {
        const data = parseData(body);
        if (typeof data?.retry_after === "number" && typeof data.reset_time === "number") {
          this.blocked.remember(check.stateKey, (check.request as LimitRequest).limit, check.sentAt, Math.floor(data.retry_after * 1000), data.reset_time);
        }
      }
    } else if (status >= 500) {
      // A node failing closed (FAIL_OPEN=false) or a proxy in front of one: the client's own rule applies.
      allowed = this.options.failOpen;
      degraded = true;
      this.counters.serverDegraded++;
    } else {
      // A request the service refused (400, 401, 413, 415): never allowed, or a caller could skip its limit with a bad one.
      allowed = false;
    }
    check.resolve(new NodeAnswer(allowed, degraded, status, headers, source, body));
  }

  onFailure(attempt: Attempt): void {
    const check = attempt.check;
    if (attempt.aborted) return; // our own abort after the deadline
    this.counters.connectionErrors++;
    attempt.node.failed(performance.now());
    this.refresh();
    if (check.settled) return;
    this.dispatch(check);
  }

  onExpired(check: Check): void {
    check.settled = true;
    const attempt = check.attempt;
    if (attempt !== undefined) {
      attempt.node.failed(performance.now());
      attempt.abort();
    }
    this.refresh();
    check.resolve(this.degraded("timeout", check.kind));
  }

  /** No node answered: the client's own answer (a reset cannot fail open: not ok). */
  private degraded(why: "timeout" | "unavailable", kind: CheckKind = CheckKind.LIMIT): Result {
    this.counters.degraded++;
    this.counters[why === "timeout" ? "timeouts" : "unavailable"]++;
    return kind === CheckKind.RESET ? resetAnswer(0, undefined, "client") : clientAnswer(this.options.failOpen);
  }

  // ------------------------------------------------------------------ ring view

  /** Fetch GET /cluster again (at most every REFRESH_MIN_INTERVAL_MS, one at a time), from `preferred` first. */
  refresh(preferred?: NodeConnection): void {
    if (this.closed || this.refreshing !== undefined || this.refreshTimer !== undefined) return;
    const wait = this.lastRefreshAt + REFRESH_MIN_INTERVAL_MS - performance.now();
    if (wait > 0) {
      this.refreshTimer = setTimeout(() => {
        this.refreshTimer = undefined;
        this.refresh(preferred);
      }, wait);
      this.refreshTimer.unref();
      return;
    }
    this.lastRefreshAt = performance.now();
    this.refreshing = this.fetchView(preferred).finally(() => {
      this.refreshing = undefined;
    });
  }

  /** Resolves when the view in use was fetched (or the fetch failed): for tests and start-up. */
  async ready(): Promise<void> {
    while (this.refreshing !== undefined) await this.refreshing;
  }

  private async fetchView(preferred: NodeConnection | undefined): Promise<void> {
    const now = performance.now();
    const order = [preferred, ...this.view.candidates.filter((n) => !n.isSkipped(now)), ...this.seeds, ...this.view.candidates];
    const tried = new Set<NodeConnection>();
    for (const node of order) {
      if (node === undefined || tried.has(node) || this.closed) continue;
      tried.add(node);
      const answer = await this.fetchCluster(node);
      if (answer === undefined) continue;
      this.counters.refreshes++;
      if (answer.ringVersion !== this.view.version) this.apply(answer);
      return;
    }
    this.counters.refreshFailures++;
  }

  private async fetchCluster(node: NodeConnection): Promise<ClusterAnswer | undefined> {
    try {
      const r = await node.pool.request({
        path: node.clusterPath,
        method: "GET",
        headers: this.getHeaders,
        headersTimeout: REFRESH_TIMEOUT_MS,
        bodyTimeout: REFRESH_TIMEOUT_MS,
      });
      const body = await r.body.json().catch(() => undefined);
      if (r.statusCode !== 200) return undefined;
      node.answered();
      return parseClusterAnswer(body);
    } catch {
      node.failed(performance.now());
      return undefined;
    }
  }

  /** Swap in the ring a node described, in one assignment; nodes no longer listed (and not seeds) are closed. */
  private apply(answer: ClusterAnswer): void {
    const owners = new Map<string, NodeConnection | undefined>();
    const members: NodeConnection[] = [];
    for (const m of answer.members) {
      let node: NodeConnection | undefined;
      if (m.url !== null) {
        try {
          node = this.node(normaliseUrl(m.url));
        } catch {
          node = undefined; // not a URL this client can use: its keys go through another node
        }
      }
      owners.set(m.id, node);
      if (node !== undefined && !members.includes(node)) members.push(node);
    }
    const candidates = [...members, ...this.seeds.filter((s) => !members.includes(s))];
    this.view = new RingView(answer.ringVersion, new HashRing(owners.keys()), owners, candidates);
    for (const [url, node] of this.nodes) {
      if (candidates.includes(node)) continue;
      this.nodes.delete(url);
      void node.close();
    }
  }

  private node(url: string): NodeConnection {
    let node = this.nodes.get(url);
    if (node === undefined) {
      node = new NodeConnection(url, this.options, this.options.retryNodeAfterMs);
      this.nodes.set(url, node);
    }
    return node;
  }
}
