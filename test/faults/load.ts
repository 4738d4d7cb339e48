import http from "node:http";
import { request, TEST_KEY } from "../harness/http-client.js";

/** One limit the client exercises: an identifier under one algorithm. */
export interface LimitKey {
  readonly identifier: string;
  readonly algorithm: "fixed-window" | "token-bucket";
  readonly limit: number;
  readonly durationS: number;
  /** what each request weighs (default 1) */
  readonly cost?: number;
  /**
   * A key that shares answer: its owner's `count` holds the shares it holds back and the grants
   * it gave (counted when given, answered later by members), so a count that climbs past the
   * exact answers says nothing of degraded answers counted (tally.ts does not try).
   */
  readonly shared?: boolean;
  /** usage reported after the fact: POST /limit/charge (counted whatever remains), not POST /limit */
  readonly charge?: boolean;
}

/** One answer as the client saw it. Times are the client's clock (unix ms). */
export interface Sample {
  sentAt: number;
  doneAt: number;
  node: number;
  key: number;
  /** HTTP status, or 0 when the request failed or timed out */
  status: number;
  degraded: boolean;
  /** `data.reset_time` (unix s) */
  resetTime: number | undefined;
  /** `data.count` on a 200 */
  count: number | undefined;
  error: string | undefined;
}

/** 30 identifiers under fixed window and token bucket, each `limit` per `durationS` (issue 14's load). */
export function limitKeys(tag: string, identifiers = 30, limit = 20, durationS = 60): LimitKey[] {
  const keys: LimitKey[] = [];
  for (const algorithm of ["fixed-window", "token-bucket"] as const) {
    for (let i = 0; i < identifiers; i++) keys.push({ identifier: `${tag}-${i}`, algorithm, limit, durationS });
  }
  return keys;
}

const TICK_MS = 20;
/**
 * The client's own connections. An idle keep-alive socket is dropped after 4 s, before the
 * server's 10 s idle close, so no request is ever written into a socket the server is
 * closing (a client-side race that would look like a fault of the cluster).
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 32, scheduling: "lifo", timeout: 4000 });
/** A client gives up on an answer after this long; the suite counts any such time-out. */
const CLIENT_TIMEOUT_MS = 3000;

/**
 * The client: `ratePerS` requests per second, round-robin over the nodes still in
 * rotation, cycling over every key so each key is asked of every node in turn.
 */
export class Load {
  readonly samples: Sample[] = [];
  private readonly inRotation: boolean[];
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly inFlightTo: Set<Promise<void>>[];
  private sent = 0;
  /** loads driven beside this one (other keys, another rate), started, stopped and balanced with it */
  private readonly companions: Load[] = [];

  constructor(
    private readonly urls: readonly string[],
    readonly keys: readonly LimitKey[],
    private readonly ratePerS = 250,
  ) {
    this.inRotation = urls.map(() => true);
    this.inFlightTo = urls.map(() => new Set());
  }

  /** Drive `other` beside this load: the balancer's rotation and start/stop apply to both. */
  also(other: Load): Load {
    this.companions.push(other);
    return other;
  }

  start(): void {
    for (const c of this.companions) c.start();
    // Paced by elapsed time, not by ticks: a late timer (a busy machine) sends what it owes.
    const started = Date.now();
    this.timer = setInterval(() => {
      const owed = Math.floor(((Date.now() - started) * this.ratePerS) / 1000) - this.sent;
      for (let i = 0; i < owed; i++) this.sendOne();
    }, TICK_MS);
  }

  /** A load balancer puts a node (back) into rotation. */
  putBack(node: number): void {
    this.inRotation[node] = true;
    for (const c of this.companions) c.putBack(node);
  }

  /**
   * A load balancer takes a node out of rotation before it is stopped, and lets the
   * requests already sent to it finish (a busy machine can queue them for seconds).
   */
  async takeOut(node: number): Promise<void> {
    this.inRotation[node] = false;
    await Promise.all([...this.inFlightTo[node]!, ...this.companions.map((c) => c.takeOut(node))]);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight, ...this.companions.map((c) => c.stop())]);
  }

  static closeConnections(): void {
    agent.destroy();
  }

  private sendOne(): void {
    const i = this.sent++;
    const key = i % this.keys.length;
    // Shift the node every full pass over the keys, so every key meets every node (whatever the
    // number of keys: key + pass, not i + pass, which sends each of 2 keys to one node of 3).
    const candidates = this.urls.map((_, n) => n).filter((n) => this.inRotation[n]);
    if (candidates.length === 0) return;
    const node = candidates[(key + Math.floor(i / this.keys.length)) % candidates.length]!;
    const p = this.ask(node, key).finally(() => {
      this.inFlight.delete(p);
      this.inFlightTo[node]!.delete(p);
    });
    this.inFlight.add(p);
    this.inFlightTo[node]!.add(p);
  }

  private async ask(node: number, keyIndex: number): Promise<void> {
    const key = this.keys[keyIndex]!;
    const sentAt = Date.now();
    const body = JSON.stringify({
      namespace: "faults",
      identifier: key.identifier,
      limit: key.limit,
      duration: key.durationS,
      algorithm: key.algorithm,
      ...(key.cost !== undefined && { cost: key.cost }),
    });
    const sample: Sample = { sentAt, doneAt: 0, node, key: keyIndex, status: 0, degraded: false, resetTime: undefined, count: undefined, error: undefined };
    try {
      const r = await request(this.urls[node] + (key.charge === true ? "/limit/charge" : "/limit"), {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
        body,
        timeoutMs: CLIENT_TIMEOUT_MS,
        agent,
      });
      sample.status = r.status;
      const data = r.json?.data;
      sample.degraded = data?.degraded === true;
      sample.resetTime = typeof data?.reset_time === "number" ? data.reset_time : undefined;
      sample.count = r.status === 200 && typeof data?.count === "number" ? data.count : undefined;
    } catch (err) {
      sample.error = (err as Error).message;
    }
    sample.doneAt = Date.now();
    this.samples.push(sample);
  }
}

/**
 * Keys that shares answer (docs/shares.md: fixed window, limit of 2,048 or more): members
 * answer them from their shares and grants without asking the owner, the path most of a hot
 * key's traffic takes. A 2,048 per 15 s with requests of cost 2 and a 4,096 per 20 s with
 * requests of cost 4 (a share is 8 requests of either; 1,024 requests fill a window), driven
 * at SHARED_RATE_PER_S: each is used up about 8 s into its window, so what a fault lets
 * through beyond the limit shows for the rest of it. The identifiers are chosen so that the
 * first is owned by node `owners[0]` and the second by `owners[1]` (a fault that strikes one
 * node then meets it as an owner and as a member).
 */
export const SHARED_RATE_PER_S = 250;
export function sharedKeys(tag: string, ownerOf: (identifier: string) => number, owners: readonly [number, number] = [2, 0]): LimitKey[] {
  const shapes = [
    { limit: 2048, durationS: 15, cost: 2 },
    { limit: 4096, durationS: 20, cost: 4 },
  ];
  return shapes.map((shape, k) => {
    let i = 0;
    while (ownerOf(`${tag}-s${shape.limit}-${i}`) !== owners[k]) i++;
    return { identifier: `${tag}-s${shape.limit}-${i}`, algorithm: "fixed-window", shared: true, ...shape };
  });
}
