/**
 * API keys scoped to namespace prefixes (`API_KEYS=svc_sk_…@checkout.,search.`, the same for
 * API_KEY_HASHES), against a real node process configured through its environment. The
 * prefix is matched on the effective namespace (namespace + "." + product slug). Out of
 * scope: 403 with the envelope, and nothing counted. Unscoped keys reach every namespace.
 *
 * Before (commit 81f8649): any API key could use any namespace, and the scoped syntax was
 * refused at start-up.
 */
import { createHash } from "node:crypto";
import t from "tap";
import { closeAgents, newApiKey, request } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";

t.teardown(closeAgents);

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

t.test("scoped and unscoped keys, plaintext and hashed", async (t) => {
  const checkout = newApiKey();
  const hashedSearch = newApiKey();
  const admin = newApiKey();
  const node = await spawnNode({
    API_KEYS: `${checkout}@checkout.,billing.eu,${admin}`,
    API_KEY_HASHES: `${sha(hashedSearch)}@search.`,
  });
  t.teardown(() => node.kill());
  const ask = (key: string, body: Record<string, unknown>) =>
    request(node.url + "/limit", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ identifier: "u1", limit: 2, duration: 60, ...body }),
    });

  const cases: [who: string, key: string, body: Record<string, unknown>, status: number, namespace?: string][] = [
    ["checkout key, checkout.web", checkout, { namespace: "checkout.web" }, 200, "checkout.web"],
    ["checkout key, namespace checkout + product", checkout, { namespace: "checkout", product: "Mobile App" }, 200, "checkout.mobile-app"],
    ["checkout key, second prefix", checkout, { namespace: "billing.eu-west" }, 200, "billing.eu-west"],
    ["checkout key, bare checkout (prefix is checkout.)", checkout, { namespace: "checkout" }, 403],
    ["checkout key, checkoutX", checkout, { namespace: "checkoutX.web" }, 403],
    ["checkout key, search.", checkout, { namespace: "search.web" }, 403],
    ["checkout key, billing.us", checkout, { namespace: "billing.us" }, 403],
    ["hashed search key, search.web", hashedSearch, { namespace: "search.web" }, 200, "search.web"],
    ["hashed search key, checkout.web", hashedSearch, { namespace: "checkout.web" }, 403],
    ["unscoped key, anything", admin, { namespace: "anything" }, 200, "anything"],
    ["unscoped key, checkout.web", admin, { namespace: "checkout.web" }, 200, "checkout.web"],
  ];
  for (const [who, key, body, status, namespace] of cases) {
    const r = await ask(key, body);
    t.equal(r.status, status, who);
    if (status === 403) {
      t.equal(r.json?.object, "error", `${who}: the envelope`);
      t.equal(r.json?.data?.error, "Forbidden");
      t.equal(r.json?.data?.status, 403);
      t.notOk(r.text.includes(key), "the key is not echoed");
    } else {
      t.equal(r.json?.data?.namespace, namespace, `${who}: effective namespace`);
    }
  }

  // A 403 does not count: the unscoped key sees the checkout key's one request only.
  await ask(checkout, { namespace: "checkout.count", identifier: "c" });
  for (let i = 0; i < 3; i++) t.equal((await ask(hashedSearch, { namespace: "checkout.count", identifier: "c" })).status, 403);
  t.equal((await ask(admin, { namespace: "checkout.count", identifier: "c" })).json?.data?.count, 2, "refused requests were not counted");

  // Order of checks: a bad body is a 400 whatever the scope; a bad key a 401.
  t.equal((await ask(checkout, { namespace: "search.x", limit: 0 })).status, 400);
  t.equal((await ask(newApiKey(), { namespace: "checkout.x" })).status, 401);

  // Batch and reset: the same scope, all or nothing.
  const post = (key: string, path: string, body: unknown) =>
    request(node.url + path, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  const item = (namespace: string) => ({ namespace, identifier: "b", limit: 5, duration: 60 });
  t.equal((await post(checkout, "/limit/batch", { requests: [item("checkout.a"), item("billing.eu1")] })).status, 200, "batch in scope");
  const mixed = await post(checkout, "/limit/batch", { requests: [item("checkout.a"), item("search.a")] });
  t.equal(mixed.status, 403, "a batch with one item out of scope is refused");
  t.equal(mixed.json?.data?.error, "Forbidden");
  t.equal((await ask(admin, { namespace: "checkout.a", identifier: "b", limit: 5 })).json?.data?.count, 2, "and none of it counted");
  t.equal((await post(checkout, "/limit/reset", { namespace: "search.web", identifier: "u1" })).status, 403, "reset out of scope");
  t.equal((await post(checkout, "/limit/reset", { namespace: "checkout.web", identifier: "u1" })).status, 200, "reset in scope");

  const metrics = await request(node.url + "/metrics");
  t.match(metrics.text, /ringlimit_requests_total\{status="403",algorithm="fixed-window"\} \d+/, "403s are counted in metrics");
});

t.test("a bad scope is refused at start-up, naming the variable and not the key", async (t) => {
  const key = newApiKey();
  for (const [env, variable] of [
    [{ API_KEYS: `${key}@` }, "API_KEYS"],
    [{ API_KEYS: `${key}@checkout.,svc_sk_short` }, "API_KEYS"],
    [{ API_KEYS: `checkout.,${key}` }, "API_KEYS"],
    [{ API_KEYS: `${key},checkout.` }, "API_KEYS"],
    [{ API_KEY_HASHES: `${sha(key)}@` }, "API_KEY_HASHES"],
    [{ API_KEY_HASHES: `${sha(key).slice(1)}@x.` }, "API_KEY_HASHES"],
  ] as const) {
    const node = await spawnNode({ ...env }, { waitReady: false });
    const timer = setTimeout(() => node.kill(), 10_000);
    const exit = await node.exited;
    clearTimeout(timer);
    t.not(exit.code, 0, `${JSON.stringify(env).replace(key, "<key>")}: refused`);
    t.match(node.output(), variable);
    t.notOk(node.output().includes(key), "the key is not printed");
  }
});
