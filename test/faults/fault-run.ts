import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Test } from "tap";
import { metric } from "../harness/cluster.js";
import { closeAgents } from "../harness/http-client.js";
import { CHARGE_RATE_PER_S, chargeKeys, chargeNote, readCharged, tallyCharges, type ChargeTally } from "./charges.js";
import { Load, limitKeys, SHARED_RATE_PER_S, sharedKeys, type LimitKey } from "./load.js";
import { createFaultNet, faultSupport, leftovers, type FaultNet } from "./net/netns.js";
import { RingWatch, startNsCluster, type NsCluster } from "./ns-cluster.js";
import { renderTable, saveRow } from "./report.js";
import { tally, type Tally } from "./tally.js";

/**
 * The network for one suite file, or undefined (and the whole file skipped with one
 * message) where namespaces and iptables are not available: not root, no iproute2 or
 * iptables, or a kernel without network namespaces.
 */
export function faultNetFor(t: Test): FaultNet | undefined {
  const why = faultSupport();
  if (why !== undefined) {
    t.plan(
      0,
      `fault suite skipped: ${why}. It needs root with iproute2 and iptables (on Debian: apt-get install -y iptables libnetfilter-queue-dev libfaketime)`,
    );
    return undefined;
  }
  const net = createFaultNet(3);
  t.teardown(() => {
    net.destroy();
    closeAgents();
    Load.closeConnections();
  });
  return net;
}

/** The file's last test: every namespace, veth, bridge and rule is gone. */
export function assertCleanedUp(t: Test, net: FaultNet): void {
  t.test("every namespace, veth, bridge and iptables rule is removed", async (t) => {
    net.destroy();
    t.same(leftovers(), [], "nothing of this run is left in `ip netns` or `ip link`");
  });
}

export interface FaultContext {
  readonly net: FaultNet;
  readonly cluster: NsCluster;
  readonly load: Load;
  readonly watch: RingWatch;
  readonly keys: readonly LimitKey[];
  /** free text for the table's notes column */
  readonly notes: string[];
}

export interface FaultSpec {
  order: number;
  fault: string;
  env?: Record<string, string>;
  perNode?: Record<number, Record<string, string>>;
  /** window length of every key (default 60 s) */
  durationS?: number;
  /** identifiers, each under both algorithms (default 30; fewer makes each one hotter) */
  identifiers?: number;
  /**
   * Also drive keys that shares answer (load.ts, sharedKeys: a 2,048 owned by the first node
   * named, a 4,096 by the second; default n3 and n1) beside the small ones, and record them as
   * a row of their own (order + 0.01).
   */
  shared?: readonly [number, number];
  /** With `shared`: also drive token-budget charges (charges.ts), and check each was counted at most once. */
  charges?: boolean;
}

/** The shared keys' row of a fault, when its spec asked for one. */
export interface SharedResult {
  tally: Tally;
  keys: readonly LimitKey[];
  /** per key: allowed beyond the limit without `degraded`, worst window */
  worstUndegraded: number[];
  charges: ChargeTally | undefined;
}

/**
 * Start the cluster, drive the load and watch the rings while `body` applies the fault,
 * then tally the answers, check what must hold under any fault (every answer is 200 or
 * 429, none times out), and record the row. The cluster is stopped and every rule
 * removed when the test ends, passed or not.
 */
export async function runFault(
  t: Test,
  net: FaultNet,
  spec: FaultSpec,
  body: (ctx: FaultContext) => Promise<void>,
): Promise<{ tally: Tally; ctx: FaultContext; shared: SharedResult | undefined }> {
  const cluster = await startNsCluster(net, spec.env, spec.perNode);
  t.teardown(async () => {
    await cluster.stop();
    net.heal();
  });
  const tag = `${spec.fault.replace(/[^a-z]+/gi, "-").slice(0, 24)}-${process.pid}-${Date.now() % 1e7}`;
  const keys = limitKeys(tag, spec.identifiers ?? 30, 20, spec.durationS ?? 60);
  const load = new Load(cluster.urls, keys, 250);
  const shared = spec.shared === undefined ? undefined : load.also(new Load(cluster.urls, sharedKeys(tag, cluster.ownerOf, spec.shared), SHARED_RATE_PER_S));
  const charging =
    spec.charges === true && shared !== undefined
      ? load.also(new Load(cluster.urls, chargeKeys(tag, cluster.ownerOf, cluster.urls.length), CHARGE_RATE_PER_S))
      : undefined;
  const watch = new RingWatch(cluster.nodes);
  const ctx: FaultContext = { net, cluster, load, watch, keys, notes: [] };
  watch.start();
  load.start();
  try {
    await body(ctx);
  } finally {
    await load.stop();
    await watch.stop();
  }
  // Forwards that missed their deadline: dropped by their owner (not counted), or counted
  // by it although answered degraded (the window the deadline budget leaves, measured by
  // the forwarding nodes). Counters of nodes still running at the end.
  const total = async (name: string) =>
    (await Promise.all(cluster.nodes.map((n) => (n === undefined ? 0 : metric(n, name).catch(() => 0))))).reduce<number>((a, b) => a + (b ?? 0), 0);
  const [dropped, countedLate] = [await total("ringlimit_forward_expired_total"), await total("ringlimit_forward_late_allowed_total")];
  if (dropped + countedLate > 0)
    ctx.notes.push(
      `${dropped} late forwards dropped by their owner; ${countedLate} counted though answered degraded (ringlimit_forward_late_allowed_total of the nodes running at the end)`,
    );
  const result = tally(load.samples, keys);
  t.equal(result.unexpected, 0, "every answer is 200 or 429 (no 5xx, no 4xx)");
  const failed = load.samples.filter((s) => s.status === 0);
  t.equal(result.failures, 0, "no request failed or timed out at the client", {
    failures: failed.slice(0, 5).map((s) => ({ node: s.node, error: s.error, ms: s.doneAt - s.sentAt })),
  });
  // FAULTS_DUMP=<dir>: every answer and the ring timeline as JSON, to study a row.
  if (process.env.FAULTS_DUMP)
    writeFileSync(
      path.join(process.env.FAULTS_DUMP, `${spec.order}.json`),
      JSON.stringify({
        keys,
        samples: load.samples,
        shared: shared && { keys: shared.keys, samples: shared.samples },
        charges: charging && { keys: charging.keys, samples: charging.samples },
        timeline: watch.timeline,
        logs: cluster.nodes.map((n) => n?.output()),
      }),
    );
  const row = { order: spec.order, fault: spec.fault, tally: result, notes: ctx.notes };
  saveRow(row);
  t.comment("\n" + renderTable([row]));
  const sharedResult = shared === undefined ? undefined : await sharedRow(t, spec, cluster, shared, charging);
  return { tally: result, ctx, shared: sharedResult };
}

/** The row of the keys shares answer (and of the charges), from the same run. */
async function sharedRow(t: Test, spec: FaultSpec, cluster: NsCluster, shared: Load, charging: Load | undefined): Promise<SharedResult> {
  const result = tally(shared.samples, shared.keys);
  t.equal(result.unexpected, 0, "shared keys: every answer is 200 or 429");
  t.equal(result.failures, 0, "shared keys: no request failed or timed out at the client");
  const names = ["n1", "n2", "n3"];
  const worstUndegraded = shared.keys.map(
    (key, k) =>
      tally(
        shared.samples.filter((s) => s.key === k).map((s) => ({ ...s, key: 0 })),
        [key],
      ).fixedWindow.worstUndegraded,
  );
  const notes = shared.keys.map(
    (key, k) =>
      `${key.limit.toLocaleString("en")} per ${key.durationS} s, cost ${key.cost} (owner ${names[cluster.ownerOf(key.identifier)]}): worst window +${worstUndegraded[k]} undegraded`,
  );
  let charges: ChargeTally | undefined;
  if (charging !== undefined) {
    const finals = await readCharged(cluster.urls, charging.keys, cluster.ownerOf);
    charges = tallyCharges(charging.samples, charging.keys, finals);
    notes.push(chargeNote(charges));
    t.equal(charges.unexpected, 0, "every charge is answered 200 or 503");
    t.not(charges.final, undefined, "every budget's count was read from its owner");
    t.equal(charges.twice, 0, "no charge counted twice");
  }
  const row = { order: spec.order + 0.01, fault: `${spec.fault}: keys shares answer`, tally: result, notes };
  saveRow(row);
  t.comment("\n" + renderTable([row]));
  return { tally: result, keys: shared.keys, worstUndegraded, charges };
}

/**
 * The bound a row of keys shares answer is held to, allowed without `degraded` beyond the
 * limit in any window of any key: "exact", none (docs/shares.md's invariant); or "one limit",
 * where two sides count the key apart (a split brain, rings that disagree) and each may admit
 * up to the limit (docs/faults.md).
 */
export function assertSharedBound(t: Test, shared: SharedResult | undefined, bound: "exact" | "one limit"): void {
  if (shared === undefined) return;
  shared.keys.forEach((key, k) => {
    const worst = shared.worstUndegraded[k]!;
    if (bound === "exact") t.equal(worst, 0, `${key.limit} key: nothing allowed beyond the limit undegraded`);
    else t.ok(worst <= key.limit, `${key.limit} key: at most one limit more undegraded per window (+${worst})`);
  });
}

/** Lines of a node's log (pino JSON) whose `msg` matches. */
export function logLines(output: string, msg: RegExp): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  for (const line of output.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (typeof entry.msg === "string" && msg.test(entry.msg)) found.push(entry);
    } catch {
      /* not JSON */
    }
  }
  return found;
}
