/**
 * Concurrency limits over a real listener: POST /limit with algorithm concurrency holds slots
 * and hands out leases, POST /limit/release frees them once (idempotent), renews them, and
 * refuses what is not one of our leases for the key; batches hold slots all or nothing.
 */
import t from "tap";
import { limit, post } from "../../harness/http-client.js";
import { useTestNode } from "../../harness/in-process-node.js";
import { uniqueId } from "../../harness/contract.js";

const node = useTestNode(t);

const keyOf = (identifier: string, limit_ = 2, duration = 3600) => ({ namespace: "conc", identifier, limit: limit_, duration, algorithm: "concurrency" });
const release = (body: Record<string, unknown>) => post(node.url, "/limit/release", body);

t.test("admits exactly `limit` holders; a release frees one slot, once", async (t) => {
  const key = keyOf(uniqueId("hold"));
  const a = await limit(node.url, key);
  t.equal(a.status, 200);
  t.equal(a.json.data.count, 1, "count: slots held");
  t.equal(a.json.data.remaining, 1, "remaining: free slots");
  t.match(a.json.data.lease, /^[A-Za-z0-9_-]{39}$/, "an opaque lease");
  const b = await limit(node.url, key);
  t.equal(b.json.data.count, 2);
  t.not(b.json.data.lease, a.json.data.lease, "each holder its own lease");
  const full = await limit(node.url, key);
  t.equal(full.status, 429);
  // A 3600 s lease lapses 3600 to 4500 s after it was taken (buckets of 900 s).
  t.ok(full.json.data.retry_after > 3590 && full.json.data.retry_after <= 4500, `retry_after ${full.json.data.retry_after}: until the earliest lease lapses`);
  t.equal(full.json.data.lease, undefined);

  const r = await release({ ...key, lease: a.json.data.lease });
  t.equal(r.status, 200);
  t.equal(r.json.object, "rate_limit_release");
  t.equal(r.json.data.released, true);
  const again = await release({ ...key, lease: a.json.data.lease });
  t.equal(again.status, 200, "a second release answers 200");
  t.equal(again.json.data.released, false, "and frees nothing");

  const c = await limit(node.url, key);
  t.equal(c.status, 200, "the freed slot is taken");
  t.equal(c.json.data.count, 2);
  t.equal((await limit(node.url, key)).status, 429, "the double release freed nothing more");
});

t.test("renew: the slot is held again under a fresh lease; the old one is spent", async (t) => {
  const key = keyOf(uniqueId("renew"), 1);
  const a = await limit(node.url, key);
  const r = await release({ ...key, lease: a.json.data.lease, renew: true });
  t.equal(r.status, 200);
  t.equal(r.json.data.released, true);
  t.match(r.json.data.lease, /^[A-Za-z0-9_-]{39}$/);
  t.equal(r.json.data.remaining, 0);
  t.equal((await limit(node.url, key)).status, 429, "still held, by the renewed lease");
  const old = await release({ ...key, lease: a.json.data.lease, renew: true });
  t.equal(old.json.data.released, false, "the old lease renews nothing");
  t.equal(old.json.data.lease, undefined);
  t.equal((await release({ ...key, lease: r.json.data.lease })).json.data.released, true);
  t.equal((await limit(node.url, key)).status, 200);
});

t.test("400: a missing, malformed, foreign or too long lease, another key's, another algorithm", async (t) => {
  const key = keyOf(uniqueId("bad"));
  const a = await limit(node.url, key);
  const lease: string = a.json.data.lease;
  const flipped = lease.slice(0, 30) + (lease[30] === "A" ? "B" : "A") + lease.slice(31);
  const cases: [string, Record<string, unknown>, string][] = [
    ["missing", { ...key }, "lease"],
    ["empty", { ...key, lease: "" }, "lease"],
    ["not a string", { ...key, lease: 42 }, "lease"],
    ["over 128 characters", { ...key, lease: "A".repeat(129) }, "lease"],
    ["forged (one character changed)", { ...key, lease: flipped }, "lease"],
    ["another identifier's", { ...key, identifier: key.identifier + "x", lease }, "lease"],
    ["another duration's", { ...key, duration: 60, lease }, "lease"],
    ["fixed-window", { ...key, algorithm: "fixed-window", lease }, "algorithm"],
    ["renew not a boolean", { ...key, lease, renew: "yes" }, "renew"],
  ];
  for (const [what, body, field] of cases) {
    const r = await release(body);
    t.equal(r.status, 400, what);
    t.equal(r.json.data.details?.[0]?.field, field, `${what}: names ${field}`);
  }
  t.equal((await limit(node.url, key)).json.data.count, 2, "none of them freed anything");
});

t.test("a lease lapses by itself: a crashed holder's slot comes back", async (t) => {
  const key = keyOf(uniqueId("lapse"), 1, 1);
  const a = await limit(node.url, key);
  t.equal(a.status, 200);
  const full = await limit(node.url, key);
  t.equal(full.status, 429);
  // A 1 s lease lapses 1 to 2 s after it was taken.
  t.ok(full.json.data.retry_after > 0 && full.json.data.retry_after <= 2, `retry_after ${full.json.data.retry_after}`);
  await new Promise((r) => setTimeout(r, full.json.data.retry_after * 1000 + 5));
  t.equal((await limit(node.url, key)).status, 200, "free after retry_after");
  t.equal((await release({ ...key, lease: a.json.data.lease })).json.data.released, false, "the lapsed lease frees nothing");
});

t.test("a batch holds a concurrency slot and a window's request all or nothing", async (t) => {
  const id = uniqueId("batch");
  const slot = keyOf(id, 1);
  const window = { namespace: "conc", identifier: id, limit: 1, duration: 3600, algorithm: "fixed-window" };
  const first = await post(node.url, "/limit/batch", { requests: [slot, window] });
  t.equal(first.status, 200);
  t.match(first.json.data.results[0].lease, /^[A-Za-z0-9_-]{39}$/, "the concurrency item's lease");
  t.equal(first.json.data.results[1].lease, undefined, "a window holds no lease");
  // The window is spent: a second batch is refused whole, so it holds no slot.
  await release({ ...slot, lease: first.json.data.results[0].lease });
  const second = await post(node.url, "/limit/batch", { requests: [slot, window] });
  t.equal(second.status, 429);
  const alone = await limit(node.url, slot);
  t.equal(alone.status, 200, "the refused batch held no slot");
  t.equal(alone.json.data.count, 1);
});

t.test("a peek holds nothing and carries no lease", async (t) => {
  const key = keyOf(uniqueId("peek"), 1);
  const p = await limit(node.url, { ...key, cost: 0 });
  t.equal(p.status, 200);
  t.equal(p.json.data.lease, undefined);
  t.equal((await limit(node.url, key)).status, 200);
});
