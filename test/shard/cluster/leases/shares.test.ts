// What a member takes of the grants owners send it (shard/cluster/leases/shares.ts): an opening
// grant larger than one share is the owner's error and is not taken, and a grant asked before
// a reset of the identifier was counted in what the reset erased, so it is not taken either.
import t from "tap";
import { algorithmByName } from "../../../../src/algorithms/index.js";
import type { LimitQuery } from "../../../../src/decision.js";
import { KnownMembers } from "../../../../src/shard/cluster/leases/known-members.js";
import { ShareTable, SHARE_KEEP_MS } from "../../../../src/shard/cluster/leases/share-table.js";
import { Shares } from "../../../../src/shard/cluster/leases/shares.js";
import { HashRing } from "../../../../src/shard/ring/ring.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";

const fixed = algorithmByName("fixed-window")!;
const T0 = 1_800_000_000_000;
const W = 60_000;
const query: LimitQuery = { namespace: "test", identifier: "user", limit: 2048, duration: 60, algorithm: fixed, cost: 1 };
const ringKey = ringKeyOf(query.namespace, query.identifier);
const stateKey = stateKeyOf(fixed.code, query.duration, ringKey);

/** A member's shares with one share of `stateKey` opened empty in the window at T0, as after a start. */
function opened() {
  const table = new ShareTable(1 << 20);
  const members = new KnownMembers(() => {});
  members.note(["a", "b", "c"], "a", 3);
  const shares = new Shares(table, members, () => false, { ring: new HashRing(["a", "b", "c"]), client: () => undefined }, 1000);
  table.take(stateKey, T0, T0 + W + SHARE_KEEP_MS, query.limit, 16, 1, false, T0);
  t.ok(shares.wantsOpening(stateKey, query.limit));
  return { table, shares };
}

t.test("an opening grant of one share is taken and kept; more than one share is refused whole", async (t) => {
  const ok = opened();
  ok.shares.openingGranted(stateKey, query, T0, 16, T0);
  t.equal(ok.table.entry(stateKey)!.left, 16, "one share taken");
  t.equal(ok.shares.granted, 16);
  const lying = opened();
  lying.shares.openingGranted(stateKey, query, T0, 17, T0);
  t.equal(lying.table.entry(stateKey)!.left, 0, "17 of a share of 16: nothing taken");
  t.equal(lying.shares.granted, 0);
});

t.test("a grant asked before a reset notice of its identifier is not taken; one asked after it is", async (t) => {
  const { table, shares } = opened();
  const askedAt = Date.now() - 10;
  shares.forgetGrants(ringKey);
  shares.openingGranted(stateKey, query, T0, 16, askedAt);
  t.equal(table.entry(stateKey)!.left, 0, "counted before the reset, erased by it");
  shares.openingGranted(stateKey, query, T0, 16, Date.now() + 10);
  t.equal(table.entry(stateKey)!.left, 16, "asked after it: taken");
});
