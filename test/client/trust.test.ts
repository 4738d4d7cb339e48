/**
 * What the client trusts, against real malicious HTTP servers (node:http on loopback, each
 * answering as an attacker who controls a node, or a name a seed resolves to, would): a 200
 * that is not a decision is not believed; a /cluster of 1,024 members is refused and ring
 * rebuilds are rate-limited; the API key goes only to allowed hosts and never from https to
 * plain http; a /cluster body is read within a bound; a 429's retry_after is remembered for
 * at most the request's window.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import t from "tap";
import { RingLimitClient, type ClientLogger } from "../../src/client/index.js";
import { selfSignedCert } from "../harness/certs.js";
import { TEST_KEY } from "../harness/http-client.js";

interface Evil {
  url: string;
  /** requests seen: method, path, whether the key came with it */
  seen: { method: string; path: string; key: boolean }[];
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, self: string) => void;

async function evilServer(handler: Handler, options: { host?: string; tls?: { cert: Buffer; key: Buffer } } = {}): Promise<Evil> {
  const host = options.host ?? "127.0.0.1";
  const seen: Evil["seen"] = [];
  let self = "";
  const listener = (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push({ method: req.method ?? "", path: req.url ?? "", key: (req.headers.authorization ?? "").includes(TEST_KEY) });
    req.resume();
    req.on("end", () => handler(req, res, self));
  };
  const server = options.tls !== undefined ? https.createServer(options.tls, listener) : http.createServer(listener);
  await new Promise<void>((r) => server.listen(0, host, r));
  self = `${options.tls !== undefined ? "https" : "http"}://${host}:${(server.address() as AddressInfo).port}`;
  return {
    url: self,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(typeof body === "string" ? body : JSON.stringify(body));
};
const cluster = (version: string, members: { id: string; url: string | null }[]) => ({
  id: "req_x",
  timestamp: Date.now(),
  api_version: "v2026.8.23",
  object: "cluster",
  data: { ring_version: version, self: members[0]?.id, members },
});
const allowedBody = () => ({
  id: "req_x",
  timestamp: Date.now(),
  api_version: "v2026.8.23",
  object: "rate_limit",
  data: {
    allowed: true,
    namespace: "n",
    identifier: "i",
    limit: 5,
    remaining: 4,
    reset_time: Math.ceil(Date.now() / 1000) + 60,
    count: 1,
    algorithm: "fixed-window",
  },
});
const silent: ClientLogger = { warn: () => {} };
const request = { namespace: "n", identifier: "i", limit: 5, duration: 60 };

t.test("a 200 is believed only when it is an allowed decision", async (t) => {
  let body: string = "";
  const evil = await evilServer((req, res, self) => {
    if (req.url === "/cluster") return json(res, 200, cluster("v1", [{ id: "evil:1", url: self }]));
    json(res, 200, body, { "content-type": "text/html" });
  });
  t.teardown(() => evil.close());
  const client = new RingLimitClient({ urls: evil.url, apiKey: TEST_KEY, timeoutMs: 5000, failOpen: false, logger: silent });
  t.teardown(() => client.close());
  const lies: [string, string][] = [
    ["an HTML page", "<html><body>Welcome</body></html>"],
    ["an empty body", ""],
    ["allowed: false", JSON.stringify({ ...allowedBody(), data: { ...allowedBody().data, allowed: false } })],
    ["no data", JSON.stringify({ object: "rate_limit" })],
  ];
  for (const [what, lie] of lies) {
    body = lie;
    t.match(await client.limit(request), { allowed: false, degraded: true, status: 200 }, `${what}: not believed, the client's failOpen (false) applies`);
  }
  t.equal(client.stats.invalidAnswers, lies.length);
  body = JSON.stringify(allowedBody());
  t.match(await client.limit(request), { allowed: true, degraded: false, status: 200 }, "a real decision is");
});

t.test("/cluster: 1,024 members are refused; a ring of new members is built at most once a second", async (t) => {
  let members = 1024;
  let fetches = 0;
  const evil = await evilServer((req, res, self) => {
    if (req.url === "/cluster") {
      fetches++;
      // Every fetch a new version and new member ids (none with a URL: checks go to the seed).
      const list = Array.from({ length: members }, (_, i) => ({ id: `m${fetches}-${i}:9000`, url: i === 0 ? self : null }));
      return json(res, 200, cluster(`v${fetches}`, list));
    }
    json(res, 200, allowedBody(), { "ringlimit-ring-version": `x${Math.random()}` });
  });
  t.teardown(() => evil.close());
  const run = async (ms: number) => {
    const client = new RingLimitClient({ urls: evil.url, apiKey: TEST_KEY, timeoutMs: 2000, logger: silent });
    const versions = new Set<string>();
    let degraded = 0;
    const end = performance.now() + ms;
    while (performance.now() < end) {
      const r = await client.limit(request);
      if (r.degraded) degraded++;
      if (client.ringVersion !== "") versions.add(client.ringVersion);
    }
    await client.close();
    return { versions: versions.size, degraded };
  };
  const big = await run(1500);
  t.equal(big.versions, 0, "no view of 1,024 members is taken");
  t.equal(big.degraded, 0, "and no check fails open for it");
  members = 20;
  fetches = 0;
  const small = await run(3000);
  t.comment(`${fetches} fetches of /cluster in 3 s, each naming new members`);
  t.ok(small.versions >= 2 && small.versions <= 5, `${small.versions} rings built in 3 s (at most one a second)`);
  t.equal(small.degraded, 0);
});

t.test("the API key goes to the seeds' hosts and memberHosts only, never from https to http", async (t) => {
  // The member: any host that answers like a node, on 127.0.0.2 (another loopback address).
  const member = await evilServer((req, res) => json(res, 200, allowedBody()), { host: "127.0.0.2" });
  t.teardown(() => member.close());
  const seed = await evilServer((req, res, self) => {
    if (req.url === "/cluster") return json(res, 200, cluster("v1", [{ id: "a:1", url: member.url }]));
    json(res, 200, allowedBody());
  });
  t.teardown(() => seed.close());
  const key = () => member.seen.filter((s) => s.key).length;

  const strict = new RingLimitClient({ urls: seed.url, apiKey: TEST_KEY, timeoutMs: 5000, logger: silent });
  for (let i = 0; i < 5; i++) t.match(await strict.limit(request), { allowed: true, degraded: false, source: "fallback" });
  await strict.close();
  t.equal(key(), 0, "by default, no request with the key reached a host the seeds did not name");

  const allowing = new RingLimitClient({ urls: seed.url, apiKey: TEST_KEY, timeoutMs: 5000, logger: silent, memberHosts: ["127.0.0.0/8"] });
  for (let i = 0; i < 5; i++) t.match(await allowing.limit(request), { allowed: true, source: "owner" });
  await allowing.close();
  t.ok(key() >= 5, "with memberHosts naming its range, the member is used");

  // An https seed that lists a plain http:// member on its own host: never sent the key.
  const { cert, key: tlsKey } = await selfSignedCert(t, { commonName: "127.0.0.1", ip: "127.0.0.1" });
  const plain = await evilServer((req, res) => json(res, 200, allowedBody()));
  t.teardown(() => plain.close());
  const secure = await evilServer(
    (req, res) => {
      if (req.url === "/cluster") return json(res, 200, cluster("v1", [{ id: "a:1", url: plain.url }]));
      json(res, 200, allowedBody());
    },
    { tls: { cert, key: tlsKey } },
  );
  t.teardown(() => secure.close());
  const tls = new RingLimitClient({ urls: secure.url, apiKey: TEST_KEY, timeoutMs: 5000, logger: silent, tls: { ca: cert }, memberHosts: ["127.0.0.1"] });
  for (let i = 0; i < 5; i++) t.match(await tls.limit(request), { allowed: true, source: "fallback" });
  await tls.close();
  t.equal(plain.seen.filter((s) => s.key).length, 0, "no request with the key went over plain http");
});

t.test("a /cluster body is read within a bound", async (t) => {
  let written = 0;
  const chunk = Buffer.alloc(64 * 1024, "x");
  const evil = await evilServer((req, res) => {
    if (req.url !== "/cluster") return json(res, 200, allowedBody());
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"data":{"ring_version":"v1","members":[{"id":"a","url":null,"pad":"');
    // Up to 64 MB, as fast as the client reads it.
    const pump = () => {
      while (written < 64 * 1024 * 1024) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      res.end('"}]}}');
    };
    res.on("close", () => res.removeAllListeners("drain"));
    pump();
  });
  t.teardown(() => evil.close());
  const client = new RingLimitClient({ urls: evil.url, apiKey: TEST_KEY, timeoutMs: 5000, logger: silent });
  t.teardown(() => client.close());
  await client.ready();
  t.equal(client.ringVersion, "", "the answer is refused");
  t.ok(written < 8 * 1024 * 1024, `the client stopped reading: ${(written / 1024 / 1024).toFixed(1)} MB written by the server of 64`);
});

t.test("a 429's retry_after is remembered for at most the request's window", async (t) => {
  let checks = 0;
  const evil = await evilServer((req, res, self) => {
    if (req.url === "/cluster") return json(res, 200, cluster("v1", [{ id: "evil:1", url: self }]));
    if (req.url === "/limit") checks++;
    json(res, 429, {
      id: "err_x",
      timestamp: Date.now(),
      api_version: "v2026.8.23",
      object: "error",
      data: { error: "Rate limit exceeded", status: 429, allowed: false, limit: 5, remaining: 0, reset_time: 4_102_444_800, retry_after: 1e12 },
    });
  });
  t.teardown(() => evil.close());
  const client = new RingLimitClient({ urls: evil.url, apiKey: TEST_KEY, timeoutMs: 5000, logger: silent });
  t.teardown(() => client.close());
  const oneSecond = { ...request, duration: 1 };
  t.match(await client.limit(oneSecond), { allowed: false, status: 429, source: "owner" });
  t.match(await client.limit(oneSecond), { allowed: false, status: 429, source: "cache" }, "remembered");
  await new Promise((r) => setTimeout(r, 1100));
  t.match(await client.limit(oneSecond), { allowed: false, status: 429, source: "owner" }, "asked again once the 1 s window has passed");
  t.equal(checks, 2);
});
