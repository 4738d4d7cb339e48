// What a member takes of the grants owners send it (shard/cluster/leases/shares.ts): an opening
// grant larger than one share is the owner's error and is not taken, and a grant asked before
// a reset of the identifier was counted in what the reset erased, so it is not taken either.
import t from "tap";
import { algorithmByName } from "../../../../src/algorithms/index.js";
import { newDecision, type LimitQuery } from "../../../../src/decision.js";
import type { PeerClient } from "../../../../src/peer/index.js";
import { ShareTable } from "../../../../src/shard/cluster/leases/share-table.js";
import { Shares } from "../../../../src/shard/cluster/leases/shares.js";
import { ResetMemory } from "../../../../src/shard/table/reset-memory.js";
import { HashRing } from "../../../../src/shard/ring/ring.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";

const fixed = algorithmByName("fixed-window")!;
const T0 = 1_800_000_000_000;
const query: LimitQuery = { namespace: "test", identifier: "user", limit: 2048, duration: 60, algorithm: fixed, cost: 1 };
const ringKey = ringKeyOf(query.namespace, query.identifier);
const stateKey = stateKeyOf(fixed.code, query.duration, ringKey);

/** An owner's connection as the shares read it: up since T0 - 1 s, heard from just now, HOLD not answered. */
function ownerClient(): PeerClient {
  return { upSince: T0 - 1000, clockOffsetMs: 0, silentMs: () => 0, call: () => Promise.reject(new Error("no")) } as unknown as PeerClient;
}

/** A member's shares with one share of `stateKey` opened empty in the window at T0, as after a start. */
function opened() {
  const table = new ShareTable(1 << 20);
  const owner = ownerClient();
  const resets = new ResetMemory(1 << 20);
  const shares = new Shares(
    table,
    resets,
    () => false,
    () => true,
    { ring: new HashRing(["a", "b", "c"]), client: () => owner },
    1000,
    1000,
  );
  t.equal(shares.answer(query, stateKey, owner, "b", T0, newDecision()), undefined, "no HOLD yes: the share opens empty");
  t.ok(shares.wantsOpening(stateKey, query.limit));
  return { table, shares, owner, resets };
}

t.test("an opening grant of one share is taken and kept; more than one share is refused whole", async (t) => {
  const ok = opened();
  ok.shares.openingGranted(stateKey, query, T0, 16, T0, ok.owner);
  t.equal(ok.table.entry(stateKey)!.left, 16, "one share taken");
  t.equal(ok.shares.granted, 16);
  const lying = opened();
  lying.shares.openingGranted(stateKey, query, T0, 17, T0, lying.owner);
  t.equal(lying.table.entry(stateKey)!.left, 0, "17 of a share of 16: nothing taken");
  t.equal(lying.shares.granted, 0);
});

t.test("a grant asked before a reset notice of its identifier is not taken; one asked after it is", async (t) => {
  const { table, shares, owner, resets } = opened();
  const askedAt = Date.now() - 10;
  // RESET_NOTICE: heard in the node's one memory of resets (by the blocked cache), then the grants dropped.
  resets.hearReset(ringKey, Date.now());
  shares.forgetGrants(ringKey);
  shares.openingGranted(stateKey, query, T0, 16, askedAt, owner);
  t.equal(table.entry(stateKey)!.left, 0, "counted before the reset, erased by it");
  shares.openingGranted(stateKey, query, T0, 16, Date.now() + 10, owner);
  t.equal(table.entry(stateKey)!.left, 16, "asked after it: taken");
});

t.test("grants live on the owner's connection they came by: a new connection (a restart, a fail-over) voids them", async (t) => {
  const { table, shares, owner } = opened();
  shares.openingGranted(stateKey, query, T0, 16, T0, owner);
  const out = newDecision();
  t.ok(shares.answer(query, stateKey, owner, "b", T0 + 1, out)?.allowed, "answered from the grant");
  t.equal(table.entry(stateKey)!.left, 15);
  (owner as { upSince: number }).upSince = T0 + 2;
  t.equal(shares.answer(query, stateKey, owner, "b", T0 + 3, out), undefined, "reconnected: the grant is void, the owner asked");
  t.equal(table.entry(stateKey)!.left, 0);
  shares.openingGranted(stateKey, query, T0, 16, T0 + 1, owner);
  t.equal(table.entry(stateKey)!.left, 16, "a grant on the new connection is taken");
  const other = ownerClient();
  t.equal(shares.answer(query, stateKey, other, "c", T0 + 4, out), undefined, "another owner (promoted): void again");
  t.equal(table.entry(stateKey)!.left, 0);
});

t.test("nothing is answered from a share of an owner silent past FAILURE_TIMEOUT_MS, or of another policy", async (t) => {
  const { shares, owner } = opened();
  shares.openingGranted(stateKey, query, T0, 16, T0, owner);
  const out = newDecision();
  (owner as unknown as { silentMs: () => number }).silentMs = () => 1001;
  t.equal(shares.answer(query, stateKey, owner, "b", T0 + 1, out), undefined, "silent 1001 ms: asked");
  (owner as unknown as { silentMs: () => number }).silentMs = () => 10;
  t.ok(shares.answer(query, stateKey, owner, "b", T0 + 1, out)?.allowed, "heard again: answered");
  const skewed = new Shares(
    new ShareTable(1 << 20),
    new ResetMemory(1 << 20),
    () => false,
    () => false,
    { ring: new HashRing(["a", "b"]), client: () => owner },
    1000,
    1000,
  );
  t.equal(skewed.answer(query, stateKey, owner, "b", T0 + 1, out), undefined, "another policy version than the owner's: asked");
});
