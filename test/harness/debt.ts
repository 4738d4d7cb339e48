/**
 * Debt through the events that move state (docs/api.md, POST /limit/charge; issue 29 item 6):
 * a key charged past its limit on real nodes, then read back exactly after a replica's
 * promotion, a hand-off or a restart from a snapshot. Counts are read with charges (a
 * charge's answer says `count` and `debt`), never against a wall-clock deadline: windows are
 * a year long, so no window ends and no bucket refills a whole request during a test (a
 * bucket of 1,000 a year refills one token in 8.76 h).
 */
import { post, limit, type Reply } from "./http-client.js";
import type { NodeProcess } from "./node-process.js";
import type { Test } from "tap";
import { ALGORITHM_NAMES } from "../../src/algorithms/index.js";

/** The algorithms that hold debt: every one but concurrency (slots are held, never owed). */
export const DEBT_ALGORITHMS = ALGORITHM_NAMES.filter((name) => name !== "concurrency");

export const YEAR = 31_536_000;
/** The limit of every debt key: below SHARE_MIN_LIMIT, so no member answers it from a share and every count is the owner's. */
export const DEBT_LIMIT = 1000;
/** What the first charge counts: 500 past the limit. */
export const FIRST_CHARGE = 1500;
/**
 * How far the moment a request of 1 passes again, as two answers state it (their `timestamp`
 * plus their `retry_after`), may differ: the answer's timestamp is written by the node asked,
 * the decision made on the owner a forward later. A debt lost or doubled moves it by months.
 */
export const RETRY_TOLERANCE_MS = 3000;

export interface DebtKey {
  algorithm: string;
  id: string;
  /** what the key counts now, as charged */
  count: number;
  /** unix ms (the nodes' clock) at which a request of 1 passes again, as the first charge stated it */
  retryAt: number;
}

export function debtKey(algorithm: string, id: string): DebtKey {
  return { algorithm, id, count: 0, retryAt: 0 };
}

const body = (key: DebtKey, extra: Record<string, unknown> = {}) => ({
  namespace: "test",
  identifier: key.id,
  limit: DEBT_LIMIT,
  duration: YEAR,
  algorithm: key.algorithm,
  ...extra,
});

/** POST /limit/charge of `cost` for `key`. */
export function chargeKey(node: NodeProcess, key: DebtKey, cost: number): Promise<Reply> {
  return post(node.url, "/limit/charge", body(key, { cost }));
}

/** POST /limit (a request of 1) for `key`. */
export function limitKey(node: NodeProcess, key: DebtKey): Promise<Reply> {
  return limit(node.url, body(key));
}

/** The moment a request of 1 passes again, as an answer states it. */
const retryAtOf = (r: Reply): number => r.json.timestamp + Math.round(r.json.data.retry_after * 1000);

/** Charge `cost` and assert the answer counts exactly what was charged before plus `cost`. */
export async function expectCharge(t: Test, node: NodeProcess, key: DebtKey, cost: number, label: string): Promise<Reply> {
  const r = await chargeKey(node, key, cost);
  t.equal(r.status, 200, `${label}: ${key.algorithm} charge ${cost} answered 200 (${r.text.slice(0, 200)})`);
  key.count = Math.max(0, key.count + cost);
  const debt = Math.max(0, key.count - DEBT_LIMIT);
  const d = r.json?.data ?? {};
  t.equal(
    `${d.count} ${d.debt} ${d.remaining} ${d.allowed}`,
    `${key.count} ${debt} ${DEBT_LIMIT - key.count + debt} ${debt === 0}`,
    `${label}: ${key.algorithm} count, debt, remaining, allowed exactly as charged`,
  );
  return r;
}

/** The first charge: FIRST_CHARGE on a fresh key, 500 past the limit; remembers when a request of 1 passes again. */
export async function chargeIntoDebt(t: Test, node: NodeProcess, key: DebtKey): Promise<void> {
  const r = await expectCharge(t, node, key, FIRST_CHARGE, "into debt");
  key.retryAt = retryAtOf(r);
  t.ok(r.json.data.retry_after > 0, `into debt: ${key.algorithm} a request of 1 waits ${r.json.data.retry_after} s`);
}

/**
 * The key is still in debt through `node`: POST /limit answers 429 with a `retry_after` that
 * ends when the first charge said (neither forgotten nor doubled), and a charge of 1 counts
 * exactly one more than was charged.
 */
export async function expectStillInDebt(t: Test, node: NodeProcess, key: DebtKey, label: string): Promise<void> {
  const r = await limitKey(node, key);
  t.equal(r.status, 429, `${label}: ${key.algorithm} ${key.id} blocked while in debt (${r.text.slice(0, 200)})`);
  if (r.status === 429) {
    const drift = retryAtOf(r) - key.retryAt;
    t.ok(Math.abs(drift) <= RETRY_TOLERANCE_MS, `${label}: ${key.algorithm} retry_after ends when the debt does (${drift} ms from the charge's)`);
  }
  // One more request owed: a bucket's debt, and a sliding window's estimate, last longer by it.
  key.retryAt = retryAtOf(await expectCharge(t, node, key, 1, label));
}

/**
 * A refund that takes the key out of debt, counted exactly once, then a request of 1 allowed
 * on top of what is left: `count` is the refunded count plus one.
 */
export async function expectRefundOnce(t: Test, node: NodeProcess, key: DebtKey, refund: number, label: string): Promise<void> {
  await expectCharge(t, node, key, -refund, `${label}, refund`);
  const r = await limitKey(node, key);
  t.equal(r.status, 200, `${label}: ${key.algorithm} allowed once paid back`);
  t.notOk(r.json?.data?.degraded, `${label}: not degraded`);
  key.count++;
  t.equal(r.json?.data?.count, key.count, `${label}: ${key.algorithm} the refund was paid back exactly once`);
}

/** A request of 1 allowed on top of what the key counts: `count` is exactly one more. */
export async function expectCountNext(t: Test, node: NodeProcess, key: DebtKey, label: string): Promise<void> {
  const r = await limitKey(node, key);
  t.equal(r.status, 200, `${label}: ${key.algorithm} ${key.id} allowed (${r.text.slice(0, 200)})`);
  t.notOk(r.json?.data?.degraded, `${label}: not degraded`);
  key.count++;
  t.equal(r.json?.data?.count, key.count, `${label}: ${key.algorithm} counts ${key.count - 1} before this request`);
}
