/**
 * The gRPC port of a real node process (GRPC_PORT) called by a real grpc-js client with the
 * package's .proto files: the RLS v3 wire without a policy (descriptors' own limits), auth,
 * INVALID_ARGUMENT, health, TLS and the draft-10 headers.
 */
import t, { type Test } from "tap";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import { selfSignedCert } from "../harness/certs.js";
import { grpcCode, oneDescriptor, rlsClient, type RlsClient } from "./rls-client.js";
import { freePort } from "../harness/ports.js";
import { sleep } from "../harness/wait.js";

const SCOPED_KEY = "svc_sk_" + "sc0p3dK3yF0rTh3Sh0pD0m41nOnlyXXXXXXXXX";
const UNAUTHENTICATED = 16;
const PERMISSION_DENIED = 7;
const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;

async function grpcNode(t: Test, env: Record<string, string> = {}): Promise<{ node: NodeProcess; address: string }> {
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), ...env });
  t.teardown(() => node.kill());
  return { node, address: `127.0.0.1:${grpcPort}` };
}

function client(t: Test, address: string, options: Parameters<typeof rlsClient>[1] = { key: TEST_KEY }): RlsClient {
  const c = rlsClient(address, options);
  t.teardown(() => c.close());
  return c;
}

/** A descriptor with its own limit: counted without any policy. */
const perMinute = (n: number) => ({ limit: { requests_per_unit: n, unit: "MINUTE" } });

t.test("RLS v3 answers on a node without a policy", async (t) => {
  const { address } = await grpcNode(t, { API_KEYS: `${TEST_KEY},${SCOPED_KEY}@shop`, RLS_RATELIMIT_HEADERS: "true" });
  const rls = client(t, address);

  t.test("a descriptor that matches no rule is OK with no current_limit", async (t) => {
    const res = await rls.shouldRateLimit(oneDescriptor("shop", [["path", "/"]]));
    t.equal(res.overall_code, "OK");
    t.equal(res.statuses.length, 1);
    t.equal(res.statuses[0].code, "OK");
    t.equal(res.statuses[0].current_limit, undefined);
    t.equal(res.statuses[0].limit_remaining, undefined, "limit_remaining 0 (proto3 leaves it out)");
  });

  t.test("a descriptor's own limit is used as given: a fixed window, OVER_LIMIT past it", async (t) => {
    const req = oneDescriptor("shop", [["user", "ann"]], perMinute(3));
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const before = Date.now();
      const res = await rls.shouldRateLimit(req);
      const after = Date.now();
      t.equal(res.overall_code, "OK");
      remaining.push(res.statuses[0].limit_remaining ?? 0);
      t.same(res.statuses[0].current_limit, { requests_per_unit: 3, unit: "MINUTE" });
      const untilReset = Number(res.statuses[0].duration_until_reset.seconds ?? 0) * 1000 + (res.statuses[0].duration_until_reset.nanos ?? 0) / 1e6;
      t.ok(untilReset > 0 && untilReset <= 60_000, `duration_until_reset ${untilReset} ms within the minute`);
      // the window's end, as the node saw the time, is a whole minute since the epoch
      const end = Math.ceil((before + untilReset) / 60_000) * 60_000;
      t.ok(end <= after + untilReset, "to the end of the minute aligned to the epoch");
    }
    t.same(remaining, [2, 1, 0]);
    const over = await rls.shouldRateLimit(req);
    t.equal(over.overall_code, "OVER_LIMIT");
    t.equal(over.statuses[0].code, "OVER_LIMIT");
    t.equal(over.statuses[0].limit_remaining ?? 0, 0);
  });

  t.test("hits_addend: the request's counts for every descriptor, a descriptor's own replaces it, 0 is a peek", async (t) => {
    const d = (user: string, extra = {}) => ({ entries: [{ key: "user", value: user }], ...perMinute(10), ...extra });
    let res = await rls.shouldRateLimit({ domain: "shop", hits_addend: 4, descriptors: [d("bob"), d("cat", { hits_addend: { value: 1 } })] });
    t.same(
      res.statuses.map((s: { limit_remaining: number }) => s.limit_remaining),
      [6, 9],
    );
    res = await rls.shouldRateLimit({ domain: "shop", hits_addend: 4, descriptors: [d("bob", { hits_addend: { value: 0 } })] });
    t.equal(res.statuses[0].limit_remaining, 6, "an explicit 0 counts nothing");
    res = await rls.shouldRateLimit({ domain: "shop", hits_addend: 0, descriptors: [d("bob")] });
    t.equal(res.statuses[0].limit_remaining, 5, "hits_addend 0 counts 1");
  });

  t.test("more hits than the limit: OVER_LIMIT, not an error, and counted (debt), as envoyproxy/ratelimit", async (t) => {
    const req = (hits: number, user = "dan") => ({
      domain: "shop",
      hits_addend: hits,
      descriptors: [{ entries: [{ key: "user", value: user }], ...perMinute(5) }],
    });
    const res = await rls.shouldRateLimit(req(6));
    t.equal(res.overall_code, "OVER_LIMIT");
    t.equal(res.statuses[0].code, "OVER_LIMIT");
    t.equal((await rls.shouldRateLimit(req(1))).statuses[0].code, "OVER_LIMIT", "in debt until the window ends");
    const big = await rls.shouldRateLimit({
      domain: "shop",
      descriptors: [
        { entries: [{ key: "user", value: "budget" }], limit: { requests_per_unit: 4_294_967_295, unit: "HOUR" }, hits_addend: { value: 4_000_000_000 } },
      ],
    });
    t.equal(big.statuses[0].code, "OK", "a uint32 budget is taken whole");
    t.equal(big.statuses[0].limit_remaining, 294_967_295);
  });

  t.test("one status per descriptor in request order; overall OVER_LIMIT when any is over", async (t) => {
    const zero = { entries: [{ key: "user", value: "eve" }], limit: { requests_per_unit: 0, unit: "SECOND" } };
    const ok = { entries: [{ key: "user", value: "fay" }], ...perMinute(2) };
    const res = await rls.shouldRateLimit({ domain: "shop", descriptors: [ok, zero, { entries: [{ key: "x", value: "y" }] }] });
    t.equal(res.overall_code, "OVER_LIMIT");
    t.same(
      res.statuses.map((s: { code: string }) => s.code),
      ["OK", "OVER_LIMIT", "OK"],
    );
    t.equal(res.statuses[0].limit_remaining, 1, "the one that passed was counted");
    t.same(res.statuses[1].current_limit, { unit: "SECOND" }, "requests_per_unit 0 blocks everything");
    t.same(res.statuses[2], { code: "OK" }, "no rule: no current_limit, limit_remaining 0");
  });

  t.test("draft-10 RateLimit and RateLimit-Policy when RLS_RATELIMIT_HEADERS is set", async (t) => {
    const res = await rls.shouldRateLimit(oneDescriptor("shop", [["user", "gus"]], perMinute(7)));
    const headers = Object.fromEntries(res.response_headers_to_add.map((h: { key: string; value: string }) => [h.key, h.value]));
    t.equal(headers["RateLimit-Policy"], '"limit";q=7;w=60');
    t.match(headers["RateLimit"], /^"limit";r=6;t=\d+$/);
  });

  t.test("auth: the API keys of POST /limit as authorization metadata", async (t) => {
    const req = oneDescriptor("shop", [["user", "hal"]], perMinute(5));
    t.equal((await grpcCode(rls.shouldRateLimit(req, null)))?.code, UNAUTHENTICATED, "no key");
    t.equal((await grpcCode(rls.shouldRateLimit(req, "svc_sk_" + "wrongwrongwrongwrongwrongwrongwrong")))?.code, UNAUTHENTICATED, "a wrong key");
    t.equal((await rls.shouldRateLimit(req, SCOPED_KEY)).statuses[0].limit_remaining, 4, "a key scoped to shop may call the domain shop");
    const denied = await grpcCode(rls.shouldRateLimit(oneDescriptor("bank", [["user", "hal"]], perMinute(5)), SCOPED_KEY));
    t.equal(denied?.code, PERMISSION_DENIED, "but not the domain bank");
    t.equal((await rls.shouldRateLimit(req)).statuses[0].limit_remaining, 3, "the refused calls counted nothing");
  });

  t.test("INVALID_ARGUMENT names the field, and nothing of the request is counted", async (t) => {
    const good = { entries: [{ key: "user", value: "ivy" }], ...perMinute(5) };
    const cases: [unknown, string][] = [
      [{ descriptors: [good] }, "domain"],
      [{ domain: "shop" }, "descriptors"],
      [{ domain: "shop", descriptors: [good, {}] }, "descriptors[1].entries"],
      [{ domain: "shop", descriptors: [good, { entries: [{ value: "v" }] }] }, "descriptors[1].entries[0].key"],
      [{ domain: "shop", descriptors: [good, { entries: [{ key: "k" }], limit: { requests_per_unit: 5 } }] }, "descriptors[1].limit.unit"],
      [{ domain: "x".repeat(257), descriptors: [good] }, "domain"],
    ];
    for (const [req, field] of cases) {
      const err = await grpcCode(rls.shouldRateLimit(req));
      t.equal(err?.code, INVALID_ARGUMENT, field);
      t.ok(err?.details.startsWith(field + ":"), `"${err?.details}" names ${field}`);
    }
    t.equal((await rls.shouldRateLimit({ domain: "shop", descriptors: [good] })).statuses[0].limit_remaining, 4, "the good descriptor was never counted");
  });

  t.test("grpc.health.v1: SERVING while ready, NOT_FOUND for an unknown service", async (t) => {
    t.same(await rls.check(), { status: "SERVING" });
    t.same(await rls.check("envoy.service.ratelimit.v3.RateLimitService"), { status: "SERVING" });
    t.equal((await grpcCode(rls.check("no.such.Service")))?.code, NOT_FOUND);
    t.same(await rls.watch(1), [{ status: "SERVING" }]);
    t.same(await rls.watch(1, "no.such.Service"), [{ status: "SERVICE_UNKNOWN" }]);
  });
});

t.test("GRPC_AUTH=none asks for no key (behind an mTLS mesh)", async (t) => {
  const { address } = await grpcNode(t, { GRPC_AUTH: "none" });
  const rls = client(t, address, { key: null });
  const res = await rls.shouldRateLimit(oneDescriptor("mesh", [["user", "joe"]], perMinute(2)));
  t.equal(res.statuses[0].limit_remaining, 1);
});

t.test("TLS on the gRPC port with the node's TLS_CERT_FILE and TLS_KEY_FILE", async (t) => {
  const cert = await selfSignedCert(t, { commonName: "localhost", ip: "127.0.0.1" });
  const { address } = await grpcNode(t, { TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: cert.keyFile });
  const secure = client(t, address, { key: TEST_KEY, ca: cert.cert });
  const res = await secure.shouldRateLimit(oneDescriptor("tls", [["user", "kim"]], perMinute(2)));
  t.equal(res.statuses[0].limit_remaining, 1, "a TLS client is answered");
  t.same(await secure.check(), { status: "SERVING" });
  const plain = client(t, address, { key: TEST_KEY, deadlineMs: 2000 });
  t.ok(await grpcCode(plain.shouldRateLimit(oneDescriptor("tls", [["user", "kim"]], perMinute(2)))), "a plaintext client is not");
});

t.test("the health service follows readiness: NOT_SERVING on a drain (SIGTERM)", async (t) => {
  const { node, address } = await grpcNode(t, { DRAIN_TIMEOUT_MS: "3000" });
  const rls = client(t, address);
  const watched = rls.watch(2);
  await sleep(200);
  node.signal("SIGTERM");
  t.same(await watched, [{ status: "SERVING" }, { status: "NOT_SERVING" }]);
  t.equal((await node.exited).code, 0);
});
