// Who an owner holds back a share for (shard/cluster/leases/holders.ts): members that asked over
// a connection still open, and for a while after it closed; never more than MAX_HOLDERS; a
// replaced member stops costing a share once every window it counted in has ended.
import t from "tap";
import { Holders, MAX_HOLDERS } from "../../../../src/shard/cluster/leases/holders.js";
import { SHARE_MAX_WINDOW_S } from "../../../../src/shard/local/share-rule.js";

const T0 = 1_800_000_000_000;
const LINGER = 2000;

t.test("a member is held back for only once it asked over an open connection", async (t) => {
  const h = new Holders(LINGER);
  t.notOk(h.admit("a", 3, T0), "no connection: no");
  h.opened("a");
  t.equal(h.countAt(T0), 0, "connected, not asked: nothing held back");
  t.ok(h.admit("a", 3, T0));
  t.ok(h.admit("a", 3, T0), "asked again: yes again");
  t.equal(h.countAt(T0), 1);
  t.notOk((h.opened("b"), h.admit("b", 17, T0)), "a ring past SHARE_MAX_MEMBERS: no");
});

t.test("a closed member counts for the windows that start within the linger, then for none", async (t) => {
  const h = new Holders(LINGER);
  h.opened("a");
  h.admit("a", 3, T0);
  h.opened("a");
  h.closed("a", T0);
  t.equal(h.countAt(T0 + 10_000), 1, "a second connection still open");
  h.closed("a", T0);
  t.equal(h.countAt(T0 - 60_000), 1, "a window begun before it closed");
  t.equal(h.countAt(T0 + LINGER), 1, "one that begins within the linger");
  t.equal(h.countAt(T0 + LINGER + 1), 0, "one that begins after it");
  t.equal(h.size, 1, "still remembered for the windows it counted in");
  t.equal(h.countAt(T0 + LINGER + SHARE_MAX_WINDOW_S * 1000 + 1), 0);
  t.equal(h.size, 0, "forgotten once they all ended");
  h.opened("a");
  t.ok(h.admit("a", 3, T0 + LINGER + SHARE_MAX_WINDOW_S * 1000 + 2), "back: asked again");
});

t.test("fourteen replaced members: the owner holds back for the live ones, and a fresh one is held back before it answers", async (t) => {
  const h = new Holders(LINGER);
  for (const m of ["a", "b"]) (h.opened(m), h.admit(m, 3, T0));
  let now = T0;
  for (let i = 0; i < 14; i++) {
    const old = i === 0 ? "b" : `r${i - 1}`;
    h.closed(old, now);
    now += 10 * 60_000;
    h.opened(`r${i}`);
    t.ok(h.admit(`r${i}`, 3, now), `replacement ${i} held back for`);
  }
  t.equal(h.countAt(now - (now % 60_000)), 2, "a and the last replacement");
});

t.test("never more than MAX_HOLDERS at once: the next is told no and answers nothing by rule", async (t) => {
  const h = new Holders(LINGER);
  for (let i = 0; i < MAX_HOLDERS; i++) (h.opened(`m${i}`), h.admit(`m${i}`, 16, T0));
  h.closed("m0", T0);
  h.opened("late");
  t.notOk(h.admit("late", 16, T0), "m0 still lingers: full");
  t.equal(h.countAt(T0), MAX_HOLDERS);
});

t.test("a ring at peer protocol 11: every member that connects is held back for, asked or not", async (t) => {
  const h = new Holders(LINGER);
  h.opened("old");
  h.holdEveryone(true, T0);
  t.equal(h.countAt(T0), 1, "connected before: held now");
  h.opened("older");
  t.equal(h.countAt(T0), 2, "connected after: held at once");
});
