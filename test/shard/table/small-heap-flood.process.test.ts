/**
 * A flood of maximal keys against a real node with a small heap
 * (NODE_OPTIONS=--max-old-space-size=64): it stays alive, serving and exact, and the table
 * holds no more bytes than its bound.
 *
 * Before (commit 81f8649, MAX_KEYS only): the same flood killed the node after 15,422 keys
 * (SIGABRT, "FATAL ERROR: Ineffective mark-compacts near heap limit Allocation failed -
 * JavaScript heap out of memory"); every later request got ECONNREFUSED.
 *
 * On Node 24 the node died here too, with the bound kept (19.2 MiB), until the harness kept
 * tap's loader out of the nodes it starts (test/harness/untapped.ts): it held every module's
 * source map, 28 MiB of the 64, which no deployed node carries.
 */
import http from "node:http";
import t from "tap";
import { request, TEST_KEY } from "../../harness/http-client.js";
import { metric } from "../../harness/cluster.js";
import { spawnNode } from "../../harness/node-process.js";

/** Two-byte namespace (256), a product whose slug expands 6x (128 → 768 characters), a 512-character two-byte identifier. */
const maximal = (i: number) =>
  JSON.stringify({
    namespace: "中".repeat(256),
    product: "\u33af".repeat(128),
    identifier: "中".repeat(500) + String(i).padStart(12, "0"),
    limit: 1_000_000,
    duration: 31_536_000,
  });

const FLOOD = Number(process.env.FLOOD_KEYS ?? 25_000);

t.test(`${FLOOD} maximal keys against a 64 MB heap`, { timeout: 240_000 }, async (t) => {
  const node = await spawnNode({ NODE_OPTIONS: "--max-old-space-size=64", MAX_KEYS: "5000000" });
  t.teardown(() => node.kill());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  t.teardown(() => agent.destroy());
  const post = (body: string) =>
    request(node.url + "/limit", {
      method: "POST",
      agent,
      headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
      body,
      timeoutMs: 30_000,
    });
  // A token bucket refilling one request per ~18 days: no window boundary can unblock it mid-test.
  const YEAR = 31_536_000;
  const victim = () => post(JSON.stringify({ namespace: "victim", identifier: "v", limit: 20, duration: YEAR, algorithm: "token-bucket" }));

  for (let i = 0; i < 20; i++) t.equal((await victim()).status, 200);
  t.equal((await victim()).status, 429, "victim blocked before the flood");

  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < FLOOD && node.child.exitCode === null) {
        const i = next++;
        const r = await post(maximal(i)).catch(() => undefined);
        if (r?.status !== 200) failed++;
      }
    }),
  );
  t.equal(node.child.exitCode, null, "the node is alive");
  t.equal(node.child.signalCode, null);
  t.equal(failed, 0, "every flood request answered 200");

  const stored = (await metric(node, "ringlimit_stored_bytes"))!;
  const bound = (await metric(node, "ringlimit_stored_bytes_limit"))!;
  const evictions = (await metric(node, "ringlimit_evictions_total"))!;
  // 30 % of the 64 MiB old space, not of heap_size_limit (112 MiB: it counts the young generation):
  // with 33.6 MiB the node died of heap exhaustion in one clean CI run of five.
  t.ok(Math.abs(bound - 0.3 * 64 * 2 ** 20) < 2 ** 20, `the bound follows the old space: ${(bound / 2 ** 20).toFixed(1)} MiB`);
  t.ok(stored <= bound, `${(stored / 2 ** 20).toFixed(1)} MiB held of ${(bound / 2 ** 20).toFixed(1)} MiB`);
  t.ok(evictions > 0, `${evictions} states evicted to stay under it`);
  t.comment(`stored keys after the flood: ${await metric(node, "ringlimit_stored_keys")}`);
  const oldSpace = await metric(node, "nodejs_heap_space_size_used_bytes", '{space="old"}');
  t.comment(`old space in use after the flood: ${((oldSpace ?? NaN) / 2 ** 20).toFixed(1)} MiB of 64`);

  t.equal((await victim()).status, 429, "the victim is still blocked: the flood freed nothing that counted");
  const fresh = [];
  for (let i = 0; i < 4; i++)
    fresh.push((await post(JSON.stringify({ namespace: "after", identifier: "f", limit: 3, duration: YEAR, algorithm: "token-bucket" }))).json?.data);
  t.same(
    fresh.map((d) => d?.count ?? "429"),
    [1, 2, 3, "429"],
    "a new key counts exactly",
  );
  t.equal((await request(node.url + "/health")).status, 200, "still serving");
  t.notMatch(node.output(), /heap out of memory|FATAL/i, "no heap exhaustion");
});
