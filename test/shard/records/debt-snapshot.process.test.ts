// Debt travels with snapshots (issue 29 item 6; docs/durability.md): a lone node with
// STATE_DIR, keys of every algorithm charged past their limit, restarted from its snapshot
// after SIGTERM (written at stop) and after SIGKILL (the periodic one): the debt is intact,
// a refund after the restart is paid back once, and the next restart keeps it paid back.
import t, { type Test } from "tap";
import { metric } from "../../harness/cluster.js";
import { clearOfWindowEnd } from "../../harness/contract.js";
import { closeAgents } from "../../harness/http-client.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { eventually } from "../../harness/wait.js";
import { DEBT_ALGORITHMS, chargeIntoDebt, debtKey, expectCountNext, expectRefundOnce, expectStillInDebt, YEAR } from "../../harness/debt.js";
import { node, stateDir } from "./snapshot-node.js";

t.teardown(closeAgents);

async function stop(t: Test, n: NodeProcess): Promise<void> {
  n.signal("SIGTERM");
  t.same(await n.exited, { code: 0, signal: null }, "SIGTERM: exit code 0");
}

t.test("SIGTERM: debt is written at stop and loaded at start; a refund after it is paid once and kept by the next restart", async (t) => {
  await clearOfWindowEnd(YEAR, 300_000);
  const dir = stateDir(t);
  // Snapshots at stop only: what is loaded is what was counted, not an earlier periodic copy.
  const env = { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "86400000" };
  const keys = DEBT_ALGORITHMS.map((algorithm) => debtKey(algorithm, `debt-${Date.now().toString(36)}-${algorithm}`));
  const first = await node(t, env);
  for (const key of keys) await chargeIntoDebt(t, first, key);
  await stop(t, first);

  const second = await node(t, env);
  t.match(second.output(), new RegExp(`"owned":${keys.length},"replicas":0,"expired":0.*restored states from snapshot`), `${keys.length} states restored`);
  for (const key of keys) await expectStillInDebt(t, second, key, "after SIGTERM and restart");
  for (const key of keys) await expectRefundOnce(t, second, key, key.count - 900, "after the restart");
  await stop(t, second);

  const third = await node(t, env);
  for (const key of keys) await expectCountNext(t, third, key, "refunded, then restarted");
});

t.test("SIGKILL: the periodic snapshot holds the debt and, once written after it, the refund", async (t) => {
  await clearOfWindowEnd(YEAR, 300_000);
  const dir = stateDir(t);
  const env = { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "200" };
  const keys = DEBT_ALGORITHMS.map((algorithm) => debtKey(algorithm, `kill-${Date.now().toString(36)}-${algorithm}`));

  /** SIGKILL `n` once a snapshot begun after now has been written, and start it again. */
  const killAfterSnapshot = async (n: NodeProcess): Promise<NodeProcess> => {
    // One ending after now may have begun before it: wait for the one after that.
    let after = Date.now() / 1000;
    for (let snapshots = 0; snapshots < 2; snapshots++) {
      const since = after;
      const written = await eventually(async () => {
        after = (await metric(n, "ringlimit_snapshot_last_success_timestamp_seconds")) ?? 0;
        return after > since;
      }, 20_000);
      t.ok(written, "a snapshot was written");
    }
    n.signal("SIGKILL");
    await n.exited;
    return node(t, env);
  };

  const first = await node(t, env);
  for (const key of keys) await chargeIntoDebt(t, first, key);
  const second = await killAfterSnapshot(first);
  for (const key of keys) await expectStillInDebt(t, second, key, "after SIGKILL and restart");
  for (const key of keys) await expectRefundOnce(t, second, key, key.count - 900, "after the restart");
  const third = await killAfterSnapshot(second);
  for (const key of keys) await expectCountNext(t, third, key, "refunded, then SIGKILLed and restarted");
});
