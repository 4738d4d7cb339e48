/**
 * What the client tells the app, against a real node: a key the service refuses (401) is
 * reported once through the app's logger, however many checks it refuses, and those checks
 * are refused (fail-closed) unless failOpenOnAuthError says otherwise; a key scoped to other
 * namespaces (403) is reported once per namespace. The key never reaches the log.
 */
import t from "tap";
import { RingLimitClient, type ClientLogger } from "../../src/client/index.js";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";

const SCOPED_KEY = "svc_sk_" + "sc0pedT0Ch3ck0utOnlyXXXXXXXXXXXXXXXXXX";
const WRONG_KEY = "svc_sk_" + "wr0ngK3yTyp0XXXXXXXXXXXXXXXXXXXXXXXXXXX";

/** A logger that keeps what it is given. */
function recorder(): ClientLogger & { lines: { details: Record<string, unknown>; message: string }[] } {
  const lines: { details: Record<string, unknown>; message: string }[] = [];
  return { lines, warn: (details, message) => void lines.push({ details, message }) };
}

const node = await spawnNode({ API_KEYS: `${TEST_KEY},${SCOPED_KEY}@checkout.` });
t.teardown(() => node.kill());
const check = (client: RingLimitClient, namespace: string, i: number) => client.limit({ namespace, identifier: `user-${i}`, limit: 100, duration: 3600 });

t.test("a wrong key: every check refused (fail-closed), one report", async (t) => {
  const logger = recorder();
  const client = new RingLimitClient({ urls: node.url, apiKey: WRONG_KEY, timeoutMs: 5000, logger });
  t.teardown(() => client.close());
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => check(client, "api", i)));
  for (const r of results) t.match(r, { allowed: false, degraded: false, status: 401 });
  for (let i = 0; i < 5; i++) t.match(await check(client, "api", i), { allowed: false, status: 401 });
  t.equal(logger.lines.length, 1, "reported once");
  t.match(logger.lines[0], {
    details: { status: 401, node: node.url },
    message: /refused the API key \(401 Unauthorized\).*fail-closed by design.*failOpenOnAuthError/,
  });
  t.notMatch(JSON.stringify(logger.lines), /wr0ngK3y/, "the key is not logged");
  t.ok(client.stats.authFailures >= 15, `${client.stats.authFailures} refusals counted`);
});

t.test("failOpenOnAuthError: a wrong key's checks are allowed, marked degraded, one report that says so", async (t) => {
  const logger = recorder();
  const client = new RingLimitClient({ urls: node.url, apiKey: WRONG_KEY, timeoutMs: 5000, logger, failOpenOnAuthError: true });
  t.teardown(() => client.close());
  for (let i = 0; i < 5; i++) t.match(await check(client, "api", i), { allowed: true, degraded: true, status: 401 });
  t.equal(logger.lines.length, 1);
  t.match(logger.lines[0]!.message, /ALLOWED, unchecked \(failOpenOnAuthError: true\)/);
});

t.test("a key scoped to other namespaces: 403 reported once per namespace, accepted checks in between", async (t) => {
  const logger = recorder();
  const client = new RingLimitClient({ urls: node.url, apiKey: SCOPED_KEY, timeoutMs: 5000, logger });
  t.teardown(() => client.close());
  for (let i = 0; i < 4; i++) {
    t.match(await check(client, "checkout.cart", i), { allowed: true, status: 200 });
    t.match(await check(client, "search", i), { allowed: false, status: 403 });
    t.match(await check(client, "billing", i), { allowed: false, status: 403 });
  }
  t.same(
    logger.lines.map((l) => [l.details.status, l.details.namespace]),
    [
      [403, "search"],
      [403, "billing"],
    ],
  );
});

t.test("without a logger, the report goes to console.warn, once", async (t) => {
  const seen: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void seen.push(args.map(String).join(" "));
  t.teardown(() => void (console.warn = warn));
  const client = new RingLimitClient({ urls: node.url, apiKey: WRONG_KEY, timeoutMs: 5000 });
  t.teardown(() => client.close());
  for (let i = 0; i < 3; i++) await check(client, "api", i);
  t.equal(seen.length, 1);
  t.match(seen[0], /^ringlimit-client: ringlimit refused the API key \(401 Unauthorized\)/);
});
