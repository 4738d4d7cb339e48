import { HashRing } from "../shard/ring/ring.js";
import type { MemberPolicy } from "./member-policy.js";
import type { ClientReporter } from "./reporting.js";
import { MAX_CLUSTER_BYTES } from "./validate.js";
import { NodeConnection, normaliseUrl } from "./node-connection.js";
import { parseClusterAnswer, RingView, type ClusterAnswer } from "./ring-view.js";
import type { ClientStats, RingLimitClientOptions } from "./types.js";

/** GET /cluster is fetched at most this often, however many answers disagree with the client's ring. */
const REFRESH_MIN_INTERVAL_MS = 100;
/** Deadline of one GET /cluster (cold path, off the checks' path). */
const REFRESH_TIMEOUT_MS = 2000;
/**
 * A ring with other members is built at most this often (the first at once). Building one
 * takes the app's event loop (up to ~0.5 s for MAX_MEMBERS on a loaded machine): a node
 * whose every answer names a new ring must not turn that into most of the loop's time.
 */
const MIN_REBUILD_INTERVAL_MS = 1000;

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
  private lastBuildAt = -Infinity;
  private readonly onFirstSettled: (() => void)[] = [];

  constructor(
    urls: readonly string[],
    private readonly options: NodeOptions,
    private readonly getHeaders: string[],
    private readonly counters: ClientStats,
    private readonly reporter: ClientReporter,
    private readonly policy: MemberPolicy,
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
      if (r.statusCode === 401 || r.statusCode === 403) this.reporter.authFailure(r.statusCode, node.url, "GET /cluster");
      if (r.statusCode !== 200) {
        await r.body.dump({ limit: 64 * 1024 }).catch(() => {});
        return undefined;
      }
      // Read within a bound: a node must not make the client hold an arbitrary body.
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of r.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > MAX_CLUSTER_BYTES) {
          r.body.destroy();
          this.reporter.distrust(
            "cluster-size:" + node.url,
            { node: node.url, limitBytes: MAX_CLUSTER_BYTES },
            "GET /cluster answered a body over the client's bound: refused",
          );
          return undefined;
        }
        chunks.push(chunk);
      }
      node.answered();
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
      const answer = parseClusterAnswer(body);
      if (answer === undefined)
        this.reporter.distrust(
          "cluster-shape:" + node.url,
          { node: node.url },
          "GET /cluster answered something that is not a member list (or over 256 members): refused",
        );
      return answer;
    } catch {
      node.failed(performance.now());
      return undefined;
    }
  }

  /**
   * Swap in the ring a node described, in one assignment; nodes no longer listed (and not
   * seeds) are closed. The same members under another version reuse the ring in use; other
   * members build a new one at most every MIN_REBUILD_INTERVAL_MS (a fetch is scheduled for
   * then instead).
   */
  private apply(answer: ClusterAnswer): void {
    const ids = [...new Set(answer.members.map((m) => m.id))].sort();
    const current = this.view.ring.members;
    const sameMembers = ids.length === current.length && ids.every((id, i) => id === current[i]);
    const now = performance.now();
    if (!sameMembers && now - this.lastBuildAt < MIN_REBUILD_INTERVAL_MS) {
      this.refreshTimer ??= setTimeout(
        () => {
          this.refreshTimer = undefined;
          this.refresh();
        },
        this.lastBuildAt + MIN_REBUILD_INTERVAL_MS - now,
      );
      this.refreshTimer.unref();
      return;
    }
    const owners = new Map<string, NodeConnection | undefined>();
    const members: NodeConnection[] = [];
    const known = new Set(this.nodes.values());
    for (const m of answer.members) {
      let node: NodeConnection | undefined;
      if (m.url !== null) {
        try {
          const url = normaliseUrl(m.url);
          const refusal = this.policy.refusal(new URL(url));
          if (refusal === undefined) node = this.node(url);
          else
            this.reporter.distrust(
              "member:" + url,
              { member: m.id, url, why: refusal },
              "a member URL of GET /cluster is not sent the API key: its checks go through a seed",
            );
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
    let ring = this.view.ring;
    if (!sameMembers) {
      ring = new HashRing(ids);
      this.lastBuildAt = performance.now();
    }
    this.view = new RingView(answer.ringVersion, ring, owners, candidates);
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
