/**
 * A reset, then the identifier counts again, then its owner leaves (SIGTERM: hand-off) or
 * dies (SIGKILL: a replica is promoted) while the new owner still remembers the reset. The
 * new owner must drop only what was counted before the reset: the requests counted after it
 * arrive with the state and keep the identifier blocked.
 */
import t, { type Test } from "tap";
import { closeAgents, post } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing } from "../../harness/cluster.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { eventually } from "../../harness/wait.js";

t.teardown(closeAgents);

const LIMIT = 10;

async function allowedOf(t: Test, via: NodeProcess, id: string, n: number, label: string): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < n; i++) {
    const r = await hit(via, id, LIMIT);
    t.notOk(r.json.data?.degraded, `${label}: not degraded`);
    if (r.status === 200) allowed++;
    else t.equal(r.status, 429, `${label}: refused`);
  }
  return allowed;
}

for (const signal of ["SIGTERM", "SIGKILL"] as const) {
  t.test(`${signal} of the owner after a reset: what was counted after the reset moves with the state`, async (t) => {
    const cluster = await startCluster(3, { REPLICAS: "2" });
    t.teardown(() => cluster.stop());
    const [a, b, c] = cluster.nodes as NodeProcess[];
    const id = cluster.identifierOwnedBy(0, `moved-${signal}`);
    // Counted on the owner itself: another node's cached block would answer for it (see reset-blocks).
    t.equal(await allowedOf(t, a!, id, LIMIT + 2, "before the reset"), LIMIT, "the limit holds");
    const r = await post(c!.url, "/limit/reset", { namespace: "test", identifier: id });
    t.equal(r.status, 200, "reset");
    t.equal(await allowedOf(t, a!, id, LIMIT + 2, "after the reset"), LIMIT, "the whole limit again, then refused");
    const caughtUp = async () => (await Promise.all([a!, b!, c!].map((n) => metric(n, "ringlimit_replication_backlog_states")))).every((v) => v === 0);
    t.ok(await eventually(caughtUp, 10_000), "replicated");
    a!.signal(signal);
    await a!.exited;
    await waitForRing([b!, c!], 2);
    t.equal(
      await allowedOf(t, b!, id, 15, `after the owner's ${signal}`),
      0,
      "the new owner refuses every request: the 10 counted since the reset moved with it",
    );
    t.equal(await allowedOf(t, c!, id, 3, "through the other survivor"), 0, "and so does the other survivor");
  });
}
