/**
 * Overrides applied to POST /limit and /limit/batch on one real node (docs/policy.md,
 * Overrides): the most specific entry wins over a table of cases, the answer's limit,
 * algorithm, counts and RateLimit headers are the applied limit's, limit 0 blocks, shadow
 * lets a block through marked `shadow: true` and counted per namespace, and a scoped key
 * reaches only its namespaces whatever the policy says.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { limit, post, request, TEST_KEY, newApiKey } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { clearOfWindowEnd, envelopeProblems, uniqueId } from "../harness/contract.js";

const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-overrides-"));
const POLICY = path.join(dir, "overrides.yaml");
writeFileSync(
  POLICY,
  `overrides:
  - {namespace: checkout, identifier: tenant-big, limit: 50}
  - {namespace: "*", identifier: tenant-big, limit: 40}
  - {namespace: "check*", identifier: "tenant-b*", limit: 35}
  - {namespace: checkout, identifier: "tenant-*", limit: 30}
  - {namespace: checkout, limit: 20}
  - {namespace: "check*", limit: 15}
  - {namespace: checkout, identifier: "abuser-*", limit: 0}
  - {namespace: hourly, limit: 3, duration: 3600, algorithm: sliding-window}
  - {namespace: trial, limit: 2, shadow: true}
  - {namespace: twin-shadow, limit: 3, algorithm: token-bucket, duration: 3600, shadow: true}
  - {namespace: twin-enforced, limit: 3, algorithm: token-bucket, duration: 3600}
`,
);
const SCOPED = newApiKey();
const node = useTestNode(t, { POLICY_PATH: POLICY, API_KEYS: `${TEST_KEY},${SCOPED}@search.` });

/** A peek (cost 0): counts nothing, answers the applied limit. */
const ask = (body: Record<string, unknown>, headers: Record<string, string> = {}) => limit(node.url, { limit: 7, duration: 60, ...body }, headers);

t.test("the most specific override wins: a table of cases through real HTTP", async (t) => {
  const cases: [namespace: string, identifier: string, product: string | undefined, applied: number, why: string][] = [
    ["checkout", "tenant-big", undefined, 50, "exact namespace and identifier"],
    ["search", "tenant-big", undefined, 40, "an exact identifier beats any wildcard identifier, whatever the namespace"],
    ["checkout", "tenant-bob", undefined, 35, "a wildcard identifier with more literal characters beats an exact namespace"],
    ["checkers", "tenant-bob", undefined, 35, "the same entry under a wildcard namespace"],
    ["checkout", "tenant-alice", undefined, 30, "the exact namespace's wildcard identifier"],
    ["checkout", "someone", undefined, 20, "the namespace alone"],
    ["checkers", "someone", undefined, 15, "a wildcard namespace alone"],
    ["check", "someone", "Out", 15, "the effective namespace (check.out) is what is matched"],
    ["elsewhere", "someone", undefined, 7, "no override: the caller's limit"],
  ];
  for (const [namespace, identifier, product, applied, why] of cases) {
    const r = await ask({ namespace, identifier, cost: 0, ...(product !== undefined ? { product } : {}) });
    t.equal(r.status, 200, why);
    t.equal(r.json.data.limit, applied, why);
    t.equal(r.json.data.remaining, applied, `${why}: remaining counts down from it`);
    t.equal(r.headers["ratelimit-policy"], `"fixed-window";q=${applied};w=60`, `${why}: RateLimit-Policy`);
  }
});

t.test("the answer is the applied limit's: counts, algorithm, window, headers and the 429", async (t) => {
  const id = uniqueId("h");
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push(await ask({ namespace: "hourly", identifier: id }));
  t.same(
    answers.map((r) => [r.status, r.json.data.limit, r.json.data.remaining, r.json.data.algorithm]),
    [
      [200, 3, 2, "sliding-window"],
      [200, 3, 1, "sliding-window"],
      [200, 3, 0, "sliding-window"],
      [429, 3, 0, undefined],
    ],
  );
  t.equal(answers[0]!.json.data.count, 1);
  t.equal(answers[0]!.headers["ratelimit-policy"], '"sliding-window";q=3;w=3600', "the applied window and algorithm");
  t.match(answers[0]!.headers["ratelimit"], /^"sliding-window";r=2;t=\d+$/);
  const blocked = answers[3]!;
  t.same(envelopeProblems(blocked, "error"), []);
  t.ok(blocked.json.data.retry_after > 60, "the wait is the applied hour's, not the asked minute's");
  t.ok(Number(blocked.headers["retry-after"]) > 60);
});

t.test("limit 0 blocks at once: 429, retry_after the window, nothing counted", async (t) => {
  const r = await ask({ namespace: "checkout", identifier: "abuser-9" });
  t.equal(r.status, 429);
  t.equal(r.json.data.limit, 0);
  t.equal(r.json.data.remaining, 0);
  t.equal(r.json.data.retry_after, 60);
  t.equal(r.headers["retry-after"], "60");
  t.equal(r.headers["ratelimit-policy"], '"fixed-window";q=0;w=60');
});

t.test("shadow: what the limit would block is answered 200, allowed, `shadow: true`, and counted per namespace", async (t) => {
  const id = uniqueId("s");
  await clearOfWindowEnd(60, 15_000);
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push(await ask({ namespace: "trial", identifier: id }));
  t.same(
    answers.map((r) => [r.status, r.json.data.allowed, r.json.data.shadow, r.json.data.limit, r.json.data.remaining]),
    [
      [200, true, undefined, 2, 1],
      [200, true, undefined, 2, 0],
      [200, true, true, 2, 0],
      [200, true, true, 2, 0],
    ],
  );
  t.same(envelopeProblems(answers[2]!, "rate_limit"), [], "the seed's shape, with one optional field");
  const metrics = (await request(node.url + "/metrics")).text;
  t.match(metrics, /^ringlimit_shadow_allowed_total\{namespace="trial"\} 2$/m);
  t.notMatch(metrics, /ringlimit_shadow_allowed_total\{namespace="checkout"\}/, "only what shadow let through");
});

t.test("shadow lets through exactly what the same policy without shadow blocks, and counts each", async (t) => {
  const id = uniqueId("twin");
  const costs = [1, 2, 1, 0, 1, 3, 1];
  const shadowed: number[] = [];
  const enforcedBlocks: number[] = [];
  const before = Number(/^ringlimit_shadow_allowed_total\{namespace="twin-shadow"\} (\d+)$/m.exec((await request(node.url + "/metrics")).text)?.[1] ?? 0);
  for (let i = 0; i < costs.length; i++) {
    const s = await ask({ namespace: "twin-shadow", identifier: id, cost: costs[i] });
    const e = await ask({ namespace: "twin-enforced", identifier: id, cost: costs[i] });
    t.equal(s.status, 200, `request ${i}: shadow answers 200`);
    if (s.json.data.shadow === true) shadowed.push(i);
    if (e.status === 429) enforcedBlocks.push(i);
  }
  t.ok(enforcedBlocks.length > 0, "the enforced twin blocks some");
  t.same(shadowed, enforcedBlocks, "the same requests");
  const after = Number(/^ringlimit_shadow_allowed_total\{namespace="twin-shadow"\} (\d+)$/m.exec((await request(node.url + "/metrics")).text)?.[1] ?? 0);
  t.equal(after - before, enforcedBlocks.length, "each counted once");
});

t.test("batches: each item gets its own override", async (t) => {
  const r = await post(node.url, "/limit/batch", {
    requests: [
      { namespace: "checkout", identifier: "tenant-big", limit: 7, duration: 60, cost: 0 },
      { namespace: "search", identifier: "tenant-big", limit: 7, duration: 60, cost: 0 },
      { namespace: "elsewhere", identifier: uniqueId("b"), limit: 7, duration: 60 },
    ],
  });
  t.equal(r.status, 200);
  t.same(
    r.json.data.results.map((x: { limit: number }) => x.limit),
    [50, 40, 7],
  );
  const denied = await post(node.url, "/limit/batch", {
    requests: [
      { namespace: "elsewhere", identifier: uniqueId("b"), limit: 7, duration: 60 },
      { namespace: "checkout", identifier: "abuser-1", limit: 7, duration: 60 },
    ],
  });
  t.equal(denied.status, 429, "a deny-listed item refuses the batch (all or nothing)");
  t.same(
    denied.json.data.results.map((x: { allowed: boolean; limit: number }) => [x.allowed, x.limit]),
    [
      [true, 7],
      [false, 0],
    ],
  );
});

t.test("a scoped key reaches only its namespaces: checked on the caller's namespace first, an override never moves it", async (t) => {
  const scoped = { authorization: `Bearer ${SCOPED}` };
  const inScope = await ask({ namespace: "search", identifier: "tenant-big", cost: 0 }, scoped);
  t.equal(inScope.status, 403, "`search` itself is not under `search.`");
  const product = await ask({ namespace: "search", product: "web", identifier: "tenant-big", cost: 0 }, scoped);
  t.equal(product.status, 200);
  t.equal(product.json.data.namespace, "search.web", "the override applied kept the caller's namespace");
  t.equal(product.json.data.limit, 40);
  const id = uniqueId("tenant-");
  t.equal((await ask({ namespace: "checkout", identifier: id }, scoped)).status, 403, "an override on checkout opens nothing");
  t.equal((await ask({ namespace: "checkout", identifier: id, cost: 0 })).json.data.remaining, 30, "and nothing was counted");
});
