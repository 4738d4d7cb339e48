import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { metric } from "../harness/cluster.js";
import { assertCleanedUp, assertSharedBound, faultNetFor, logLines, runFault } from "./fault-run.js";
import { sleep } from "../harness/wait.js";

// Issue 14's fault suite, part 3: graceful leaves (SIGTERM) meeting partitions.

const net = faultNetFor(t);
if (net !== undefined) {
  // Issue 14 item 5: the isolated node turns unready; a balancer that follows /ready stops
  // sending to it, which bounds the split brain to the time it takes to notice.
  t.test("one node cut off both ways, behind a readiness-aware balancer", async (t) => {
    const { shared } = await runFault(
      t,
      net,
      { order: 2.5, fault: "one node cut off both ways, 10 s, behind a readiness-aware balancer", shared: [2, 0] },
      async ({ net, load, watch, notes }) => {
        await sleep(3000);
        const cutAt = Date.now();
        net.isolate(2);
        let outAt: number | undefined;
        while (Date.now() - cutAt < 10_000) {
          const latest = watch.timeline[watch.timeline.length - 1];
          if (outAt === undefined && latest !== undefined && latest.at > cutAt && latest.ready[2] === false) {
            outAt = Date.now() - cutAt;
            await load.takeOut(2);
          }
          await sleep(100);
        }
        net.heal();
        const healAt = Date.now();
        while (Date.now() - healAt < 10_000 && watch.timeline[watch.timeline.length - 1]?.ready[2] !== true) await sleep(100);
        load.putBack(2);
        notes.push(outAt === undefined ? "isolated node never unready" : `balancer took the isolated node out ${outAt} ms after the cut`);
        await sleep(1500);
      },
    );
    assertSharedBound(t, shared, "one limit");
  });

  t.test("a partition racing a SIGTERM hand-off", async (t) => {
    const { shared } = await runFault(
      t,
      net,
      { order: 6, fault: "n3 cut off from n1 as it starts its SIGTERM hand-off", shared: [2, 0] },
      async ({ net, cluster, load, notes }) => {
        await sleep(3000);
        const leaving = cluster.nodes[2]!;
        const held = await metric(leaving, "ringlimit_stored_keys");
        await load.takeOut(2);
        const termAt = Date.now();
        net.dropFrom(2, 0);
        net.dropFrom(0, 2);
        leaving.signal("SIGTERM");
        await leaving.exited;
        const drainMs = Date.now() - termAt;
        const report = logLines(leaving.output(), /left the ring/)[0];
        notes.push(`drain ${drainMs} ms (DRAIN_TIMEOUT_MS 6000)`);
        notes.push(`n3 held ${held} states: ${report?.handedOver ?? "?"} handed over, ${report?.notHandedOver ?? "?"} not`);
        // The batch for the unreachable n1 fails once n1 is declared down, and goes to the next owner.
        t.equal(report?.notHandedOver, 0, "every state handed over despite the cut");
        t.ok(drainMs < 6000, `the drain ends before DRAIN_TIMEOUT_MS (${drainMs} ms)`);
        net.heal();
        await sleep(3000);
      },
    );
    assertSharedBound(t, shared, "exact");
  });

  t.test("SIGTERM while isolated", async (t) => {
    // Issue 14 item 6: what an isolated node cannot hand over goes to STATE_DIR at stop and
    // comes back when it restarts (merged with what the others counted meanwhile).
    const stateDir = mkdtempSync(path.join(tmpdir(), "ringlimit-faults-state-"));
    t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
    const spec = {
      order: 7,
      fault: "SIGTERM of n3 while it is cut off from both others (n3 with STATE_DIR), then restarted",
      perNode: { 2: { STATE_DIR: stateDir } },
      shared: [2, 0] as const,
    };
    const { shared } = await runFault(t, net, spec, async ({ net, cluster, load, watch, notes }) => {
      await sleep(3000);
      const leaving = cluster.nodes[2]!;
      const held = await metric(leaving, "ringlimit_stored_keys");
      const cutAt = Date.now();
      net.isolate(2);
      // Wait until n3 knows it is alone, then stop it.
      while (watch.firstAfter(cutAt, (s) => s[2] === 1) === undefined && Date.now() - cutAt < 5000) await sleep(100);
      await load.takeOut(2);
      const termAt = Date.now();
      leaving.signal("SIGTERM");
      await leaving.exited;
      const report = logLines(leaving.output(), /left the ring/)[0];
      notes.push(`exit ${Date.now() - termAt} ms after SIGTERM`);
      notes.push(`n3 held ${held} states: ${report?.handedOver ?? "?"} handed over, ${report?.notHandedOver ?? "?"} not`);
      net.heal();
      await sleep(1000);
      const back = await cluster.start(2);
      const restored = logLines(back.output(), /restored states from snapshot/)[0];
      notes.push(`restarted: ${restored?.owned ?? 0} restored from STATE_DIR (${restored?.expired ?? 0} expired meanwhile)`);
      t.equal(
        Number(restored?.owned ?? 0) + Number(restored?.expired ?? 0),
        report?.notHandedOver,
        "every state it could not hand over was written at stop and read back at restart",
      );
      load.putBack(2);
      await sleep(3000);
    });
    assertSharedBound(t, shared, "one limit");
  });

  assertCleanedUp(t, net);
}
