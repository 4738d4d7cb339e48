/**
 * GET /top on a 3-node cluster of real processes (docs/api.md): 50 abusers among 10,000
 * well-behaved identifiers, blocked at every node, are ranked exactly, merged across the
 * ring, while each node's summary is small enough (MAX_MEMORY_MB=32: some 2,000 entries per summary) to overflow; a scoped
 * key sees only its namespaces; bad `n` is a 400.
 */
import t from "tap";
import { AUTH_HEADER, closeAgents, limit, newApiKey, post, request, TEST_KEY } from "../harness/http-client.js";
import { startCluster } from "../harness/cluster.js";

t.teardown(closeAgents);

const ABUSERS = 50;
const WELL_BEHAVED = 10_000;

/** Run `tasks` with at most `width` in flight. */
async function pool(tasks: (() => Promise<unknown>)[], width: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) await tasks[next++]!();
    }),
  );
}

t.test("3 nodes: 50 abusers among 10,000 identifiers ranked exactly, merged across the ring", async (t) => {
  const scoped = newApiKey();
  const cluster = await startCluster(3, { MAX_MEMORY_MB: "32", API_KEYS: `${TEST_KEY},${scoped}@other.` });
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);

  // Abuser i is blocked 10 + 3i times, its requests spread over the three nodes.
  const blocked = (i: number) => 10 + 3 * i;
  const tasks: (() => Promise<unknown>)[] = [];
  for (let i = 0; i < ABUSERS; i++) {
    for (let k = 0; k <= blocked(i); k++) {
      tasks.push(() => limit(nodes[(i + k) % 3]!.url, { namespace: "api", identifier: `abuser-${i}`, limit: 1, duration: 3600 }));
    }
  }
  await pool(tasks, 24);
  // The well-behaved: each blocked once (noise that overflows every node's summary), in batches of 100.
  const batches: (() => Promise<unknown>)[] = [];
  for (let b = 0; b < WELL_BEHAVED / 100; b++) {
    const requests = Array.from({ length: 100 }, (_, j) => ({ namespace: "api", identifier: `user-${b * 100 + j}`, limit: 1, duration: 3600 }));
    batches.push(async () => {
      t.equal((await post(nodes[b % 3]!.url, "/limit/batch", { requests })).status, 200);
      t.equal((await post(nodes[(b + 1) % 3]!.url, "/limit/batch", { requests })).status, 429);
    });
  }
  await pool(batches, 6);

  const r = await request(nodes[0]!.url + "/top?n=60", { headers: AUTH_HEADER });
  t.equal(r.status, 200);
  t.equal(r.json.object, "top");
  t.equal(r.json.data.members, 3);
  t.equal(r.json.data.answered, 3, "every member answered");
  const top = r.json.data.top as { namespace: string; identifier: string; blocked: number; error: number }[];
  t.same(
    top.slice(0, ABUSERS).map((e) => e.identifier),
    Array.from({ length: ABUSERS }, (_, i) => `abuser-${ABUSERS - 1 - i}`),
    "the 50 abusers first, most blocked first",
  );
  const off = top
    .slice(0, ABUSERS)
    .filter((e) => !(e.blocked - e.error <= blocked(Number(e.identifier.slice(7))) && e.blocked >= blocked(Number(e.identifier.slice(7)))));
  t.same(off, [], "each count within its error of the truth");
  t.ok(
    top.slice(ABUSERS).every((e) => e.identifier.startsWith("user-") && e.blocked <= 1 + e.error),
    "then well-behaved ones, blocked once",
  );

  const n5 = await request(nodes[1]!.url + "/top?namespace=api&n=5", { headers: AUTH_HEADER });
  t.same(
    n5.json.data.top.map((e: { identifier: string }) => e.identifier),
    ["abuser-49", "abuser-48", "abuser-47", "abuser-46", "abuser-45"],
    "any member answers the same, n=5",
  );
  const def = await request(nodes[2]!.url + "/top", { headers: AUTH_HEADER });
  t.equal(def.json.data.top.length, 20, "n defaults to 20");

  const asScoped = { authorization: `Bearer ${scoped}` };
  const mine = await request(nodes[0]!.url + "/top", { headers: asScoped });
  t.equal(mine.status, 200);
  t.same(mine.json.data.top, [], "a key scoped to other. sees none of api's");
  t.equal((await request(nodes[0]!.url + "/top?namespace=api", { headers: asScoped })).status, 403);
  for (const bad of ["0", "1001", "x", "-1", "1.5"])
    t.equal((await request(nodes[0]!.url + `/top?n=${bad}`, { headers: AUTH_HEADER })).status, 400, `n=${bad}`);
  t.equal((await request(nodes[0]!.url + "/top")).status, 401);
});
