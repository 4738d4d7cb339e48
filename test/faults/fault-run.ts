import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Test } from "tap";
import { metric } from "../harness/cluster.js";
import { closeAgents } from "../harness/http-client.js";
import { Load, limitKeys, type LimitKey } from "./load.js";
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
): Promise<{ tally: Tally; ctx: FaultContext }> {
  const cluster = await startNsCluster(net, spec.env, spec.perNode);
  t.teardown(async () => {
    await cluster.stop();
    net.heal();
  });
  const tag = `${spec.fault.replace(/[^a-z]+/gi, "-").slice(0, 24)}-${process.pid}-${Date.now() % 1e7}`;
  const keys = limitKeys(tag, spec.identifiers ?? 30, 20, spec.durationS ?? 60);
  const load = new Load(cluster.urls, keys, 250);
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
      JSON.stringify({ keys, samples: load.samples, timeline: watch.timeline, logs: cluster.nodes.map((n) => n?.output()) }),
    );
  const row = { order: spec.order, fault: spec.fault, tally: result, notes: ctx.notes };
  saveRow(row);
  t.comment("\n" + renderTable([row]));
  return { tally: result, ctx };
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
