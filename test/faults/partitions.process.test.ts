import t from "tap";
import { assertCleanedUp, assertSharedBound, faultNetFor, runFault } from "./fault-run.js";
import { sleep } from "../harness/wait.js";

// Issue 14's fault suite, part 1: no fault, a node cut off both ways, a one-way cut.
// Three nodes in network namespaces, 250 requests/s round-robin, 30 identifiers × fixed
// window and token bucket, 20 per 60 s. The table row of each fault is printed and saved
// (`node dist/test/faults/report.js` prints the whole table).

const net = faultNetFor(t);
if (net !== undefined) {
  t.test("no fault: exact", async (t) => {
    const { tally, shared } = await runFault(t, net, { order: 1, fault: "none", shared: [2, 0], charges: true }, async () => {
      await sleep(6000);
    });
    assertSharedBound(t, shared, "exact");
    t.equal(shared?.charges?.lost, 0, "every charge answered 200 is in its owner's count");
    // A forward can miss its 100 ms deadline on a busy machine and fail open even without a
    // fault; anything beyond the limit must be such a fail-open answer.
    const over = tally.fixedWindow.overAdmitted + tally.tokenBucket.overAdmitted;
    t.ok(over <= tally.degraded, `allowed beyond a limit (${over}) only by fail-open answers (${tally.degraded})`);
    t.ok(tally.countedWithoutExactAnswer <= tally.degraded, `counted without an exact answer: ${tally.countedWithoutExactAnswer}`);
  });

  const CUT_MS = 15_000;
  t.test("one node cut off both ways, then healed", async (t) => {
    let detected: number | undefined;
    let healedRing: number | undefined;
    let minorityUnready: number | undefined;
    const { shared } = await runFault(
      t,
      net,
      { order: 2, fault: `one node cut off both ways, ${CUT_MS / 1000} s`, shared: [2, 0], charges: true },
      async ({ net, watch, notes }) => {
        await sleep(3000);
        const cutAt = Date.now();
        net.isolate(2);
        await sleep(CUT_MS);
        const healAt = Date.now();
        net.heal();
        // Bounded wait for the full ring; the row says how long it took, or that it did not come back.
        const waitMs = 25_000;
        while (Date.now() - healAt < waitMs && watch.firstAfter(healAt, (s) => s.every((x) => x === 3)) === undefined) await sleep(100);
        await sleep(2000);
        detected = watch.firstAfter(cutAt, (s) => s[2] === 1 && s[0] === 2 && s[1] === 2);
        healedRing = watch.firstAfter(healAt, (s) => s.every((x) => x === 3));
        minorityUnready = watch.firstAfter(cutAt, (_, ready) => ready[2] === false);
        notes.push(`split detected by all in ${detected ?? "never"} ms`);
        notes.push(healedRing === undefined ? `ring not whole ${waitMs / 1000} s after the heal` : `full ring ${healedRing} ms after the heal`);
        notes.push(
          minorityUnready === undefined || minorityUnready > CUT_MS ? "isolated node stayed ready" : `isolated node unready after ${minorityUnready} ms`,
        );
      },
    );
    // The isolated node is sent a third of the traffic (the client ignores /ready) and decides
    // every key alone: a second count beside the majority's, shared keys included.
    assertSharedBound(t, shared, "one limit");
    t.ok(detected !== undefined, `the split was detected (${detected} ms)`);
    // Target ~2 s (issue 14); the bound leaves room for a loaded 2-core machine.
    t.ok(healedRing !== undefined && healedRing < 5000, `full ring ${healedRing} ms after the heal`);
    t.ok(minorityUnready !== undefined && minorityUnready < CUT_MS, `the isolated node turned unready (${minorityUnready} ms)`);
  });

  // Six hot identifiers (~20 requests/s each): a count reset by ring disagreement shows at once.
  t.test("one-way cut: n1 drops n2's packets", async (t) => {
    const { shared } = await runFault(
      t,
      net,
      { order: 3, fault: "one-way cut (n1 drops n2's packets), 6 hot identifiers, 12 s", identifiers: 6, shared: [0, 1] },
      async ({ net, watch, notes }) => {
        // Past the 5 s join fence of a fresh cluster: a steady cluster, as in production.
        await sleep(5000);
        const cutAt = Date.now();
        net.dropFrom(0, 1);
        await sleep(12_000);
        net.heal();
        const rings = new Set(watch.timeline.filter((s) => s.at >= cutAt).map((s) => s.sizes.join("/")));
        notes.push(`ring sizes seen (n1/n2/n3): ${[...rings].join(", ")}`);
        await sleep(1000);
      },
    );
    assertSharedBound(t, shared, "one limit");
  });

  // Issue 22 item 9: a flap, not a partition that lasts. n1 and n2 lose each other for 1.5 s
  // (a one-way cut: TCP needs both directions) and drop each other; n3 sees both all along.
  // Each would otherwise take the other's keys over from what it holds, or send them to n3,
  // whose ring still names their owner. The hold is set above the flap's length (5 s), so
  // whatever either lets through for the other's keys must be a degraded answer.
  t.test("a flap: n1 and n2 lose each other for 1.5 s", async (t) => {
    const { tally, shared } = await runFault(
      t,
      net,
      {
        order: 3.5,
        fault: "a flap: n1 drops n2's packets for 1.5 s (TAKEOVER_HOLD_MS 5 s), 6 hot identifiers",
        identifiers: 6,
        env: { TAKEOVER_HOLD_MS: "5000" },
        shared: [0, 1],
      },
      async ({ net, watch, notes }) => {
        await sleep(5000); // past the join fences of a fresh cluster
        const cutAt = Date.now();
        net.dropFrom(0, 1);
        await sleep(1500);
        const healAt = Date.now();
        net.heal();
        while (Date.now() - healAt < 15_000 && watch.firstAfter(healAt, (s) => s.every((x) => x === 3)) === undefined) await sleep(100);
        const rings = new Set(watch.timeline.filter((s) => s.at >= cutAt).map((s) => s.sizes.join("/")));
        notes.push(
          `ring sizes seen (n1/n2/n3): ${[...rings].join(", ")}; full ring ${watch.firstAfter(healAt, (s) => s.every((x) => x === 3)) ?? "never"} ms after the heal`,
        );
        await sleep(1500);
      },
    );
    const over = tally.fixedWindow.overAdmitted + tally.tokenBucket.overAdmitted;
    t.ok(over <= tally.degraded, `allowed beyond a limit (${over}) only by fail-open answers (${tally.degraded})`);
    assertSharedBound(t, shared, "exact");
  });

  assertCleanedUp(t, net);
}
