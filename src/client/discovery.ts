import { HashRing } from "../shard/ring/ring.js";
import type { ClientReporter } from "./reporting.js";
import { NodeConnection, normaliseUrl } from "./node-connection.js";
import { parseClusterAnswer, RingView, type ClusterAnswer } from "./ring-view.js";
import type { ClientStats, RingLimitClientOptions } from "./types.js";

/** GET /cluster is fetched at most this often, however many answers disagree with the client's ring. */
const REFRESH_MIN_INTERVAL_MS = 100;
/** Deadline of one GET /cluster (cold path, off the checks' path). */
const REFRESH_TIMEOUT_MS = 2000;

export type NodeOptions = Pick<RingLimitClientOptions, "connections" | "tls"> & { retryNodeAfterMs: number };

/**
 * The client's view of the ring and the connections to its members: fetched from GET
 * /cluster at start and whenever an answer carries another ring version or a node stops
 * answering, at most every REFRESH_MIN_INTERVAL_MS and one fetch at a time. A new view is
 * swapped in with one assignment; nodes no longer listed (and not seeds) are closed.
 */
export class Discovery {
  readonly seeds: NodeConnection[];
  /** the view checks route by: before the first answer, a ring of none and the seeds as candidates */
  view: RingView;
  private readonly nodes = new Map<string, NodeConnection>();
  private refreshing: Promise<void> | undefined;
  private lastRefreshAt = -Infinity;
  private refreshTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private firstSettled = false;
  private readonly onFirstSettled: (() => void)[] = [];

  constructor(
    urls: readonly string[],
    private readonly options: NodeOptions,
    private readonly getHeaders: string[],
    private readonly counters: ClientStats,
    private readonly reporter: ClientReporter,
  ) {
    this.seeds = [...new Set(urls.map(normaliseUrl))].map((u) => this.node(u));
    this.view = new RingView("", new HashRing([]), new Map(), this.seeds);
  }

  /** Whether the first fetch of GET /cluster has ended, answered or not. */
  get started(): boolean {
    return this.firstSettled;
  }

  /** Call `f` once the first fetch has ended (at once if it has). */
  whenStarted(f: () => void): void {
    if (this.firstSettled) f();
    else this.onFirstSettled.push(f);
  }

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
      this.settleFirst();
    });
  }

  /** Resolves when the view in use was fetched (or the fetch failed). */
  async ready(): Promise<void> {
    while (this.refreshing !== undefined) await this.refreshing;
  }

  /** Stop fetching and close every connection. */
  close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refreshTimer);
    this.settleFirst();
    return Promise.all([...this.nodes.values()].map((n) => n.close())).then(() => {});
  }

  private settleFirst(): void {
    if (this.firstSettled) return;
    this.firstSettled = true;
    for (const f of this.onFirstSettled.splice(0)) f();
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
      if (r.statusCode === 401 || r.statusCode === 403) this.reporter.authFailure(r.statusCode, node.url, "GET /cluster");
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
    const known = new Set(this.nodes.values());
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
    // Connections to members seen for the first time are opened now, off the checks' path.
    for (const node of members) if (!known.has(node)) node.warm(REFRESH_TIMEOUT_MS);
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
