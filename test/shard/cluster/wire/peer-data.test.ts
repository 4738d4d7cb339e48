import t from "tap";
import { ALGORITHMS, MAX_COUNT, algorithmByCode } from "../../../../src/algorithms/index.js";
import { BatchMode, decodeBatchRequest, encodeBatchRequest } from "../../../../src/shard/cluster/wire/batch-wire.js";
import {
  AGE_TOLERANCE_MS,
  admitState,
  checkState,
  forwardedWithinContract,
  replyWithinContract,
  resetTimeHere,
} from "../../../../src/shard/cluster/wire/peer-data.js";
import { DecideFlag, newDecideResult } from "../../../../src/peer/index.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";
import { removalRecord, decodeStates, encodeStates, isRemoval } from "../../../../src/shard/records/state-records.js";

const NOW = 1_800_000_123_456;
const D = 60_000;
const key = (code: number, duration = 60, identifier = "user-1") => stateKeyOf(code, duration, ringKeyOf("ns", identifier));
const windowStart = NOW - (NOW % D);
const exp = (ms: number) => Math.ceil(ms / 1000);

// Peers send states with their times as ages at the send (shard/records/state-records.ts).
const age = NOW % D; // the age of the current window's start

t.test("checkState: honest states of every algorithm pass unchanged", async (t) => {
  const cases = [
    { code: 0, state: { a: age, b: 7, c: 0, expiresInS: exp(D - age) } },
    { code: 1, state: { a: age, b: 7, c: 3, expiresInS: exp(2 * D - age) } },
    { code: 1, state: { a: D + age, b: 7, c: 3, expiresInS: exp(D - age) } }, // the previous window, still weighing
    { code: 2, state: { a: 5 * D, b: 10, c: 10, expiresInS: exp(D) } },
    { code: 2, state: { a: -10 * D, b: 0, c: 10, expiresInS: exp(2 * D) } }, // a merge owes one whole bucket
    { code: 2, state: { a: 0, b: -AGE_TOLERANCE_MS, c: 10, expiresInS: exp(D) } }, // the sender's clock stepped back a little
    { code: 3, state: { a: 5 * D, b: 10, c: 10, expiresInS: exp(D) } },
  ];
  for (const { code, state } of cases) {
    const copy = { ...state };
    t.equal(checkState(key(code), copy), "ok", `${algorithmByCode(code)!.name}`);
    t.same(copy, state, "unchanged");
  }
});

t.test("checkState: the forged states of issue 10 are refused or clamped, one by one", async (t) => {
  const refused: Array<[string, string, { a: number; b: number; c: number; expiresInS: number }]> = [
    ["negative count (made a key unlimited)", key(0), { a: age, b: -4294967290, c: 0, expiresInS: 60 }],
    ["expiry 2^32-1 s after the send (blocked ~136 years)", key(0), { a: age, b: 5, c: 0, expiresInS: 0xffffffff }],
    ["expiry beyond two windows", key(2), { a: 0, b: 0, c: 10, expiresInS: exp(2 * D + AGE_TOLERANCE_MS) + 3 }],
    ["window start in the far future (blocked ~1e288 years)", key(0), { a: -1e300, b: 1e6, c: 0, expiresInS: 60 }],
    ["window start stamped after the send beyond the tolerance", key(0), { a: -AGE_TOLERANCE_MS - 1, b: 1, c: 0, expiresInS: 60 }],
    ["fractional age", key(0), { a: 0.5, b: 1, c: 0, expiresInS: 60 }],
    ["fractional count", key(1), { a: age, b: 1.5, c: 0, expiresInS: 60 }],
    ["NaN", key(1), { a: age, b: NaN, c: 0, expiresInS: 60 }],
    ["NaN age", key(1), { a: NaN, b: 1, c: 0, expiresInS: 60 }],
    ["duration 0", key(0, 0), { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["duration over a year", key(0, 31_536_001), { a: 0, b: 1, c: 0, expiresInS: 60 }],
    ["algorithm code 7", stateKeyOf(7, 60, ringKeyOf("ns", "x")), { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["non-canonical key (a second counter for one key)", "0060:2:nsuser-1", { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["identifier over 512 characters", key(0, 60, "x".repeat(513)), { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["empty identifier", stateKeyOf(0, 60, ringKeyOf("ns", "")), { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["not UTF-8 (decoded to an empty key)", "", { a: age, b: 1, c: 0, expiresInS: 60 }],
    ["token bucket with a limit of 0", key(2), { a: 0, b: 0, c: 0, expiresInS: 60 }],
    ["token bucket with more tokens than capacity", key(2), { a: 11 * D, b: 0, c: 10, expiresInS: 60 }],
    ["token bucket stamped after the send beyond the tolerance (no refill for that long)", key(2), { a: 0, b: -AGE_TOLERANCE_MS - 1, c: 10, expiresInS: 60 }],
    ["token bucket stamped over two years ago", key(2), { a: 0, b: 2 * 31_536_000_000 + 1, c: 10, expiresInS: 60 }],
    ["leaky bucket with a negative meter (unlimited)", key(3), { a: -1e15, b: 0, c: 10, expiresInS: 60 }],
  ];
  for (const [name, k, state] of refused) t.equal(checkState(k, { ...state }), "invalid", name);

  const clamped = { a: age, b: 1e18, c: 0, expiresInS: 60 };
  t.equal(checkState(key(0), clamped), "ok");
  t.equal(clamped.b, MAX_COUNT, "a huge count is clamped where a charge saturates it");
  const debt = { a: age, b: 1e12, c: 0, expiresInS: 60 };
  t.equal(checkState(key(0), debt), "ok");
  t.equal(debt.b, 1e12, "a count past every limit is debt (POST /limit/charge): it travels whole");
  const owed = { a: -1e15, b: 0, c: 10, expiresInS: exp(2 * D) };
  t.equal(checkState(key(2), owed), "ok");
  t.equal(owed.a, -10 * D, "tokens owed are clamped to one whole bucket");
  const full = { a: 1e15, b: 0, c: 10, expiresInS: exp(2 * D) };
  t.equal(checkState(key(3), full), "ok");
  t.equal(full.a, 20 * D, "a meter is clamped to two buckets");

  t.equal(checkState(key(0), { a: D + age, b: 5, c: 0, expiresInS: 1 }), "expired", "a window begun a whole window ago is nothing");
  t.equal(checkState(key(1), { a: 2 * D, b: 5, c: 5, expiresInS: 1 }), "expired", "a sliding window two windows ago is nothing");
  t.equal(checkState(key(2), { a: 0, b: 0, c: 10, expiresInS: 0 }), "expired", "expiring at the send");
});

t.test("admitState: a peer's state is put on this node's clock, its skew is irrelevant", async (t) => {
  // The sender's clock read NOW − 5 min when it wrote these ages; this node reads NOW.
  const fw = admitState(key(0), { a: 20_000, b: 7, c: 0, expiresInS: 40, origin: 9, bornAgoS: 20 }, NOW);
  t.same(
    fw,
    { a: windowStart, b: 7, c: 0, expiresAt: exp(windowStart + D), origin: 9, born: Math.floor(NOW / 1000) - 20 },
    "a window begun 20 s ago is this node's current one, kept to its end, born 20 s ago here",
  );
  const tb = admitState(key(2), { a: 3 * D, b: 2500, c: 10, expiresInS: 42, origin: 9, bornAgoS: 0 }, NOW);
  t.same(tb, { a: 3 * D, b: NOW - 2500, c: 10, expiresAt: exp(NOW) + 42, origin: 9, born: Math.floor(NOW / 1000) }, "a level 2.5 s old is 2.5 s old here");
  t.equal(admitState(key(0), { a: -1e300, b: 1, c: 0, expiresInS: 60, origin: 9, bornAgoS: 0 }, NOW), "invalid");
  t.equal(admitState(key(0), { a: D, b: 1, c: 0, expiresInS: 1, origin: 9, bornAgoS: 0 }, NOW), "expired");
});

t.test("replyWithinContract: the forged answers of issue 10 fail open, sound ones pass", async (t) => {
  const query = { namespace: "ns", identifier: "id", limit: 5, duration: 60, algorithm: algorithmByCode(0)!, cost: 1 };
  const good = { ...newDecideResult(), code: 0, remaining: 4, resetTime: exp(NOW + D), retryAfterMs: 0 };
  t.ok(replyWithinContract(good, query, NOW));
  t.ok(replyWithinContract({ ...good, code: 1, remaining: 0, resetTime: exp(NOW + 2 * D), retryAfterMs: 2 * D }, query, NOW), "a sliding window's reach");
  // An override applied on the owner: the answer is checked against the limit it applied.
  const applied = { ...good, flags: DecideFlag.APPLIED, limit: 500, duration: 3600, algorithm: 0, remaining: 400, resetTime: exp(NOW + 3600_000) };
  t.ok(replyWithinContract(applied, query, NOW), "remaining and reset within the applied limit and window");
  t.ok(replyWithinContract({ ...applied, limit: 0, remaining: 0, code: 1, retryAfterMs: 3600_000 }, query, NOW), "limit 0: a deny list");
  t.notOk(replyWithinContract({ ...applied, remaining: 501 }, query, NOW), "remaining beyond the applied limit");
  t.notOk(replyWithinContract({ ...applied, algorithm: 200 }, query, NOW), "an unknown applied algorithm");
  t.notOk(replyWithinContract({ ...applied, duration: 0 }, query, NOW), "an applied window out of contract");
  t.notOk(replyWithinContract({ ...applied, limit: 2_000_000, remaining: 0 }, query, NOW), "an applied limit out of contract");
  t.notOk(replyWithinContract({ ...good, remaining: 0, code: 1, flags: DecideFlag.SHADOW }, query, NOW), "shadow on a blocked answer");
  t.ok(replyWithinContract({ ...good, remaining: 0, flags: DecideFlag.SHADOW }, query, NOW), "shadow on an allowed answer");
  // DUPLICATE: the owner's remembered answer to a charge with an id, whose reset may have passed since.
  const charged = { ...query, charge: true, chargeId: "c-1" };
  t.ok(replyWithinContract({ ...good, flags: DecideFlag.DUPLICATE, resetTime: exp(NOW - 10 * D) }, charged, NOW), "a duplicate's past reset");
  t.notOk(replyWithinContract({ ...good, flags: DecideFlag.DUPLICATE }, { ...query, charge: true }, NOW), "DUPLICATE for a charge sent without an id");
  t.notOk(replyWithinContract({ ...good, flags: DecideFlag.DUPLICATE, resetTime: 0xffffffff }, charged, NOW), "a duplicate's reset years ahead");
  for (const [name, bad] of [
    ["remaining beyond the limit (count -4294967290)", { remaining: 4294967295 }],
    ["retry_after NaN", { retryAfterMs: NaN }],
    ["negative retry", { retryAfterMs: -1 }],
    ["retry years ahead", { retryAfterMs: 1e12 }],
    ["reset years ahead", { resetTime: 0xffffffff }],
    ["reset long past", { resetTime: 0 }],
    ["fractional remaining", { remaining: 1.5 }],
  ] as const) {
    t.notOk(replyWithinContract({ ...good, ...bad }, query, NOW), name);
  }
});

t.test("checkState: a removal record (a reset's) passes the key checks and reads as expired, so a receiver that does not know removals drops it", async (t) => {
  for (const { code } of ALGORITHMS) {
    const [record] = decodeStates(encodeStates([{ key: key(code), state: removalRecord(NOW - 3000) }], NOW));
    t.ok(isRemoval(record!.state), "still a removal once its times are ages");
    t.equal(record!.state.bornAgoS, 3, "it carries the reset's time, as an age");
    t.equal(checkState(key(code), record!.state), "expired", algorithmByCode(code)!.name);
  }
  t.equal(checkState("not a key", { a: 0, b: 0, c: 0, expiresInS: 0 }), "invalid", "a forged key is still refused");
});

t.test("forwardedWithinContract: a forwarded decision is held to the bounds of POST /limit, on DECIDE and BATCH alike", async (t) => {
  const id512 = "i".repeat(512);
  t.ok(forwardedWithinContract(1_000_000, 31_536_000, 1_000_000, "n", id512), "every bound at its largest");
  t.ok(forwardedWithinContract(1, 1, 0, "n".repeat(300), "i"), "at its smallest; a long effective namespace (with the slug) passes");
  const out: Array<[string, [number, number, number, string, string]]> = [
    ["limit 0", [0, 60, 0, "n", "i"]],
    ["limit above 1,000,000", [1_000_001, 60, 1, "n", "i"]],
    ["duration 0", [5, 0, 1, "n", "i"]],
    ["duration above a year", [5, 31_536_001, 1, "n", "i"]],
    ["cost above the limit", [5, 60, 6, "n", "i"]],
    ["negative cost", [5, 60, -1, "n", "i"]],
    ["NaN limit", [NaN, 60, 1, "n", "i"]],
    ["empty namespace", [5, 60, 1, "", "i"]],
    ["empty identifier", [5, 60, 1, "n", ""]],
    ["identifier of 513", [5, 60, 1, "n", "i".repeat(513)]],
  ];
  for (const [why, args] of out) t.notOk(forwardedWithinContract(...args), why);
  const item = (cost: number) => ({ namespace: "n", identifier: "i", limit: 5, duration: 60, algorithm: ALGORITHMS[0]!, cost });
  t.equal(decodeBatchRequest(encodeBatchRequest(BatchMode.DECIDE, 1, 100, [item(5)])).queries[0]!.cost, 5, "a BATCH item within bounds decodes");
  t.throws(
    () => decodeBatchRequest(encodeBatchRequest(BatchMode.DECIDE, 1, 100, [item(5), item(6)])),
    /out of contract/,
    "a BATCH item asking more than its limit is refused",
  );
});

t.test("resetTimeHere: an owner's reset time is put on this node's clock with the measured offset", async (t) => {
  const ownerEnd = 1_800_000_060; // the owner's window end, on its clock
  t.equal(resetTimeHere(ownerEnd, 300_000), ownerEnd - 300, "an owner 5 min ahead");
  t.equal(resetTimeHere(ownerEnd, -30_000), ownerEnd + 30, "an owner 30 s behind");
  t.equal(resetTimeHere(ownerEnd, 29_600), ownerEnd - 30, "to the nearest second");
  t.equal(resetTimeHere(ownerEnd, -400), ownerEnd, "clocks in step (a measurement a few ms off) change nothing");
  t.equal(resetTimeHere(ownerEnd, 3), ownerEnd);
  t.equal(resetTimeHere(ownerEnd, NaN), ownerEnd, "no heartbeat measured yet: unchanged");
});
