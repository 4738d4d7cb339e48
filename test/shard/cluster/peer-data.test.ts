import t from "tap";
import { ALGORITHMS, algorithmByCode } from "../../../src/algorithms/index.js";
import { BatchMode, decodeBatchRequest, encodeBatchRequest } from "../../../src/shard/cluster/batch-wire.js";
import { checkState, CLOCK_SKEW_MS, forwardedWithinContract, replyWithinContract } from "../../../src/shard/cluster/peer-data.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/table/state-key.js";
import { REMOVED } from "../../../src/shard/table/state-records.js";

const NOW = 1_800_000_123_456;
const D = 60_000;
const key = (code: number, duration = 60, identifier = "user-1") => stateKeyOf(code, duration, ringKeyOf("ns", identifier));
const windowStart = NOW - (NOW % D);
const exp = (ms: number) => Math.ceil(ms / 1000);

t.test("checkState: honest states of every algorithm pass unchanged", async (t) => {
  const cases = [
    { code: 0, state: { a: windowStart, b: 7, c: 0, expiresAt: exp(windowStart + D) } },
    { code: 1, state: { a: windowStart, b: 7, c: 3, expiresAt: exp(windowStart + 2 * D) } },
    { code: 2, state: { a: 5 * D, b: NOW - 10, c: 10, expiresAt: exp(NOW + D) } },
    { code: 2, state: { a: -10 * D, b: NOW, c: 10, expiresAt: exp(NOW + 2 * D) } }, // a merge owes one whole bucket
    { code: 3, state: { a: 5 * D, b: NOW - 10, c: 10, expiresAt: exp(NOW + D) } },
  ];
  for (const { code, state } of cases) {
    const copy = { ...state };
    t.equal(checkState(key(code), copy, NOW), "ok", `${algorithmByCode(code)!.name}`);
    t.same(copy, state, "unchanged");
  }
});

t.test("checkState: the forged states of issue 10 are refused or clamped, one by one", async (t) => {
  const refused: Array<[string, string, { a: number; b: number; c: number; expiresAt: number }]> = [
    ["negative count (made a key unlimited)", key(0), { a: windowStart, b: -4294967290, c: 0, expiresAt: exp(windowStart + D) }],
    ["expiry 2^32-1 (blocked ~136 years)", key(0), { a: windowStart, b: 5, c: 0, expiresAt: 0xffffffff }],
    ["window start in the far future (blocked ~1e288 years)", key(0), { a: 1e300 - (1e300 % D), b: 1e6, c: 0, expiresAt: exp(windowStart + D) }],
    ["window start not on a window boundary", key(0), { a: windowStart + 1, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["fractional count", key(1), { a: windowStart, b: 1.5, c: 0, expiresAt: exp(windowStart + D) }],
    ["NaN", key(1), { a: windowStart, b: NaN, c: 0, expiresAt: exp(windowStart + D) }],
    ["duration 0", key(0, 0), { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["duration over a year", key(0, 31_536_001), { a: 0, b: 1, c: 0, expiresAt: exp(NOW + D) }],
    ["algorithm code 7", stateKeyOf(7, 60, ringKeyOf("ns", "x")), { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["non-canonical key (a second counter for one key)", "0060:2:nsuser-1", { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["identifier over 512 characters", key(0, 60, "x".repeat(513)), { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["empty identifier", stateKeyOf(0, 60, ringKeyOf("ns", "")), { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["not UTF-8 (decoded to an empty key)", "", { a: windowStart, b: 1, c: 0, expiresAt: exp(windowStart + D) }],
    ["token bucket with a limit of 0", key(2), { a: 0, b: NOW, c: 0, expiresAt: exp(NOW + D) }],
    ["token bucket with more tokens than capacity", key(2), { a: 11 * D, b: NOW, c: 10, expiresAt: exp(NOW + D) }],
    ["token bucket stamped in the future", key(2), { a: 0, b: NOW + CLOCK_SKEW_MS + 1, c: 10, expiresAt: exp(NOW + D) }],
    ["leaky bucket with a negative meter (unlimited)", key(3), { a: -1e15, b: NOW, c: 10, expiresAt: exp(NOW + D) }],
  ];
  for (const [name, k, state] of refused) t.equal(checkState(k, { ...state }, NOW), "invalid", name);

  const clamped = { a: windowStart, b: 1e12, c: 0, expiresAt: exp(windowStart + D) };
  t.equal(checkState(key(0), clamped, NOW), "ok");
  t.equal(clamped.b, 1_000_000, "a huge count is clamped to the largest limit");
  const owed = { a: -1e15, b: NOW, c: 10, expiresAt: exp(NOW + 2 * D) };
  t.equal(checkState(key(2), owed, NOW), "ok");
  t.equal(owed.a, -10 * D, "tokens owed are clamped to one whole bucket");
  const full = { a: 1e15, b: NOW, c: 10, expiresAt: exp(NOW + 2 * D) };
  t.equal(checkState(key(3), full, NOW), "ok");
  t.equal(full.a, 20 * D, "a meter is clamped to two buckets");

  t.equal(checkState(key(0), { a: windowStart - D, b: 5, c: 0, expiresAt: exp(windowStart) }, NOW), "expired", "an old window is nothing");
});

t.test("replyWithinContract: the forged answers of issue 10 fail open, sound ones pass", async (t) => {
  const query = { namespace: "ns", identifier: "id", limit: 5, duration: 60, algorithm: algorithmByCode(0)!, cost: 1 };
  const good = { code: 0, remaining: 4, resetTime: exp(NOW + D), retryAfterMs: 0 };
  t.ok(replyWithinContract(good, query, NOW));
  t.ok(replyWithinContract({ code: 1, remaining: 0, resetTime: exp(NOW + 2 * D), retryAfterMs: 2 * D }, query, NOW), "a sliding window's reach");
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
  for (let code = 0; code < 4; code++) t.equal(checkState(key(code), { ...REMOVED }, NOW), "expired", algorithmByCode(code)!.name);
  t.equal(checkState("not a key", { ...REMOVED }, NOW), "invalid", "a forged key is still refused");
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
