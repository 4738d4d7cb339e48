/** Reservations: counted at once, kept on commit, given back on release or when their hold runs out (one sweep). */
import t from "tap";
import { ALGORITHMS } from "../../../src/algorithms/index.js";
import { decideBatchOn } from "../../../src/shard/local/batch.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { NO_SHARERS } from "../../../src/shard/local/share-rule.js";
import { ringKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;

for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: reserve, then commit, release or expire`, async (t) => {
    const table = new StateTable(1000, T0);
    const local = new LocalDecider(table);
    const q = (id: string, cost: number) => ({ namespace: "ns", identifier: id, limit: 10, duration: 60, algorithm: alg, cost });
    const peek = (id: string, now: number) => local.decideSync(q(id, 0), now).remaining;
    const reserve = (name: string, id: string, cost: number, now: number) => {
      const r = decideBatchOn(table, NO_SHARERS, [q(id, cost)], [ringKeyOf("ns", id)], now, true, true);
      t.ok(r.allowed);
      t.equal(r.standing![0]!.remaining, 10, "the view before the batch");
      local.reservations.hold(name, r.counted, now + 2000);
    };
    reserve("c/1", "kept", 4, T0);
    reserve("c/2", "given-back", 4, T0);
    reserve("c/3", "expired", 4, T0);
    t.equal(peek("given-back", T0), 6, "a reservation counts at once");
    t.ok(local.reservations.commit("c/1"));
    t.ok(local.reservations.release("c/2", T0 + 10));
    t.notOk(local.reservations.release("c/2", T0 + 10), "released once");
    t.equal(peek("kept", T0 + 10), 6);
    t.equal(peek("given-back", T0 + 10), 10);
    t.equal(local.reservations.sweep(T0 + 1999), 0, "held until its deadline");
    t.equal(local.reservations.sweep(T0 + 2000), 1);
    t.equal(peek("expired", T0 + 2000), 10, "given back by the sweep");
    t.equal(local.reservations.size, 0);
  });
}
