/**
 * The owner applies the operator's overrides (docs/policy.md, Overrides) before it decides:
 * the applied limit, window and algorithm, a deny list, shadow mode, a reload between two
 * decisions, and the keys overrides never touch (RLS descriptors').
 */
import t from "tap";
import { algorithmByName } from "../../../src/algorithms/index.js";
import type { LimitQuery } from "../../../src/decision.js";
import { compilePolicy } from "../../../src/policy/index.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const NOW = 1_800_000_000_000;
const policyOf = (text: string) => compilePolicy([{ path: "overrides.yaml", name: "overrides.yaml", text }]);
const POLICY = policyOf(`
overrides:
  - {namespace: api, identifier: big, limit: 5}
  - {namespace: api, identifier: "abuser-*", limit: 0}
  - {namespace: api, identifier: hourly, limit: 3, duration: 3600}
  - {namespace: api, identifier: sliding, limit: 3, algorithm: sliding-window}
  - {namespace: api, identifier: "trial-*", limit: 1, shadow: true}
  - {namespace: quiet, shadow: true}
`);

const query = (identifier: string, over: Partial<LimitQuery> = {}): LimitQuery => ({
  namespace: "api",
  identifier,
  limit: 2,
  duration: 60,
  algorithm: algorithmByName("fixed-window")!,
  cost: 1,
  overridable: true,
  ...over,
});

function decider(policy = POLICY, shadowMode = false): LocalDecider {
  const d = new LocalDecider(new StateTable(1000, NOW));
  d.setPolicy(policy, shadowMode);
  return d;
}

/** n decisions of one query: whether each was allowed, as 1/0. */
const run = (d: LocalDecider, q: LimitQuery, n: number, now = NOW) => Array.from({ length: n }, () => (d.decideSync(q, now).allowed ? 1 : 0));

t.test("an override's limit replaces the asked one; no override: the asked one", async (t) => {
  const d = decider();
  t.same(run(d, query("big"), 6), [1, 1, 1, 1, 1, 0], "limit 5 applied to a caller asking for 2");
  const one = d.decideSync(query("big", { cost: 0 }), NOW);
  t.same(one.applied && { limit: one.applied.limit, duration: one.applied.duration, algorithm: one.applied.algorithm.name }, {
    limit: 5,
    duration: 60,
    algorithm: "fixed-window",
  });
  t.same(run(d, query("plain"), 3), [1, 1, 0], "no override: the caller's limit");
  t.equal(d.decideSync(query("plain"), NOW).applied, null, "and nothing applied");
});

t.test("limit 0 blocks without touching a state; retry_after is the applied window", async (t) => {
  const d = decider();
  const table = d.table;
  const r = d.decideSync(query("abuser-7"), NOW);
  t.equal(r.allowed, false);
  t.equal(r.remaining, 0);
  t.equal(r.retryAfterMs, 60_000, "the window");
  t.equal(r.resetTime, Math.ceil((NOW + 60_000) / 1000));
  t.equal(r.applied?.limit, 0);
  t.equal(table.size, 0, "no state created");
  t.equal(d.decideSync(query("abuser-7", { cost: 0 }), NOW).allowed, false, "a peek is blocked too");
});

t.test("a changed limit keeps what was counted; a changed window or algorithm is another state, a fresh count", async (t) => {
  const plainPolicy = policyOf("overrides:\n  - {namespace: other, limit: 1}\n");
  const d = decider(plainPolicy);
  t.same(run(d, query("big"), 2), [1, 1], "two counted under the caller's limit of 2");
  t.same(run(d, query("hourly"), 2), [1, 1]);
  t.same(run(d, query("sliding"), 2), [1, 1]);
  d.setPolicy(POLICY, false);
  t.same(run(d, query("big"), 4), [1, 1, 1, 0], "limit 5: the 2 counted stay, 3 more fit");
  t.same(run(d, query("hourly"), 4), [1, 1, 1, 0], "duration 3600: a state of its own, all 3 fit");
  t.same(run(d, query("sliding"), 4), [1, 1, 1, 0], "sliding-window: a state of its own, all 3 fit");
  d.setPolicy(plainPolicy, false);
  t.same(run(d, query("hourly"), 1), [0], "the override gone: the caller's state, where 2 were counted");
});

t.test("a cost above the applied limit is blocked without touching a state", async (t) => {
  const d = decider(policyOf("overrides:\n  - {namespace: api, identifier: small, limit: 1}\n"));
  const r = d.decideSync(query("small", { cost: 2 }), NOW);
  t.equal(r.allowed, false);
  t.equal(d.table.size, 0);
});

t.test("shadow: decided and counted as usual, a block answered allowed and marked", async (t) => {
  const d = decider();
  const answers = Array.from({ length: 3 }, () => {
    const r = d.decideSync(query("trial-1"), NOW);
    return [r.allowed, r.shadow, r.remaining, r.applied?.limit];
  });
  t.same(answers, [
    [true, false, 0, 1],
    [true, true, 0, 1],
    [true, true, 0, 1],
  ]);
  t.same(run(d, query("x", { namespace: "quiet" }), 3), [1, 1, 1], "a shadow entry without a limit: the caller's limit, in shadow");
  t.equal(d.decideSync(query("x", { namespace: "quiet" }), NOW).shadow, true);
  t.same(run(d, query("y", { namespace: "quiet" }), 2), [1, 1]);
  // Counted as usual: without shadow, the same key is over its limit.
  d.setPolicy(policyOf('overrides:\n  - {namespace: api, identifier: "trial-*", limit: 1}\n'), false);
  t.same(run(d, query("trial-1"), 1), [0], "the same policy without shadow blocks it: the count went on");
});

t.test("SHADOW_MODE: every POST /limit key in shadow, with or without a policy", async (t) => {
  const d = decider(undefined, true);
  const answers = run(d, query("k"), 4);
  t.same(answers, [1, 1, 1, 1]);
  t.equal(d.decideSync(query("k"), NOW).shadow, true);
  t.equal(d.decideSync(query("k2"), NOW).shadow, false, "allowed on its own: not marked");
});

t.test("a key that is not overridable (an RLS descriptor's) is decided as asked", async (t) => {
  const d = decider(POLICY, true);
  t.same(run(d, query("abuser-1", { overridable: false }), 3), [1, 1, 0], "no deny list, no shadow");
  t.equal(d.decideSync(query("big", { overridable: false }), NOW).applied, null);
});

t.test("batches: each item gets its own override, all or nothing as before", async (t) => {
  const d = decider();
  const outcome = await new Promise<{ allowed: boolean[]; limits: (number | undefined)[]; shadow: boolean[] }>((resolve) =>
    d.decideBatch([query("big"), query("trial-2"), query("trial-2"), query("plain")], NOW, (o) =>
      resolve({ allowed: o.decisions.map((x) => x.allowed), limits: o.decisions.map((x) => x.applied?.limit), shadow: o.decisions.map((x) => x.shadow) }),
    ),
  );
  t.same(outcome, { allowed: [true, true, true, true], limits: [5, 1, 1, undefined], shadow: [false, false, true, false] });
  const denied = await new Promise<boolean[]>((resolve) =>
    d.decideBatch([query("big"), query("abuser-2")], NOW, (o) => resolve(o.decisions.map((x) => x.allowed))),
  );
  t.same(denied, [true, false], "a deny-listed item refuses the batch");
  t.same(run(d, query("big", { cost: 0 }), 1), [1]);
  t.equal(d.decideSync(query("big", { cost: 0 }), NOW).remaining, 4, "the refused batch counted nothing: 1 of 5 from the first batch");
});
