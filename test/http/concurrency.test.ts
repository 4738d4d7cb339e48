/**
 * Hundreds of parallel requests on one key, each on its own connection, against a real
 * listener: exactly `limit` are allowed, the rest get 429, and the allowed answers carry
 * the counts 1..limit once each. Durations are a year so no refill or window change can
 * happen during the test.
 */
import t, { type Test } from "tap";
import { request, TEST_KEY, type Reply } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { ALGORITHM_NAMES, envelopeProblems, uniqueId } from "../harness/contract.js";

const node = useTestNode(t);

const YEAR = 31_536_000;
const headers = { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" };
/** Every request on a fresh connection, all started before any answer is read. */
const fire = (body: unknown): Promise<Reply> =>
  request(node.url + "/limit", { method: "POST", headers, body: JSON.stringify(body), agent: false, timeoutMs: 20_000 });

function checkExact(t: Test, replies: Reply[], limit: number, what: string): void {
  const ok = replies.filter((r) => r.status === 200);
  const blocked = replies.filter((r) => r.status === 429);
  t.equal(ok.length, limit, `${what}: exactly ${limit} allowed`);
  t.equal(blocked.length, replies.length - limit, `${what}: the rest blocked`);
  const counts = ok.map((r) => r.json.data.count as number).sort((a, b) => a - b);
  t.same(
    counts,
    Array.from({ length: limit }, (_, i) => i + 1),
    `${what}: counts 1..${limit} each once`,
  );
  const remainings = ok.map((r) => r.json.data.remaining as number).sort((a, b) => a - b);
  t.same(
    remainings,
    Array.from({ length: limit }, (_, i) => i),
    `${what}: remaining 0..${limit - 1} each once`,
  );
  const bad = [...ok.flatMap((r) => envelopeProblems(r, "rate_limit")), ...blocked.flatMap((r) => envelopeProblems(r, "error"))];
  t.same(bad.slice(0, 5), [], `${what}: every envelope well-formed`);
  t.ok(
    blocked.every((r) => r.json.data.remaining === 0 && r.json.data.retry_after > 0 && Number(r.headers["retry-after"]) >= 1),
    `${what}: 429s say remaining 0 and when to retry`,
  );
  t.equal(new Set(replies.map((r) => r.json.id)).size, replies.length, `${what}: ids unique`);
}

for (const algorithm of ALGORITHM_NAMES) {
  t.test(`${algorithm}: 400 parallel requests, limit 100`, async (t) => {
    const body = { namespace: "race", identifier: uniqueId(algorithm), limit: 100, duration: YEAR, algorithm };
    const replies = await Promise.all(Array.from({ length: 400 }, () => fire(body)));
    checkExact(t, replies, 100, algorithm);
    // the state is exactly used up: one more is blocked
    t.equal((await fire(body)).status, 429);
  });
}

t.test("four algorithms and several keys at once: each key exact on its own", async (t) => {
  const id = uniqueId("mixed");
  const keys: { namespace: string; identifier: string; limit: number; duration: number; algorithm?: string; product?: string }[] = [
    ...ALGORITHM_NAMES.map((algorithm) => ({ namespace: "race", identifier: id, limit: 30, duration: YEAR, algorithm })),
    { namespace: "race", identifier: id, limit: 30, duration: YEAR - 1 }, // same identifier, other duration
    { namespace: "race", product: "Other", identifier: id, limit: 30, duration: YEAR }, // same identifier, other product
    { namespace: "race", identifier: id + "-b", limit: 30, duration: YEAR },
  ];
  const plan = keys.flatMap((body, k) => Array.from({ length: 70 }, () => k));
  // interleave so every key's requests are spread over the whole burst
  for (let i = plan.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [plan[i], plan[j]] = [plan[j]!, plan[i]!];
  }
  const replies = await Promise.all(plan.map((k) => fire(keys[k])));
  keys.forEach((key, k) => {
    const mine = replies.filter((_, i) => plan[i] === k);
    checkExact(t, mine, 30, `key ${k} (${key.algorithm ?? "fixed-window"}, ${key.duration}${key.product ? ", product" : ""})`);
  });
});
