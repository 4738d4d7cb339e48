/**
 * POST /json on the main port of a real node process, over real HTTP: Envoy's RLS request in
 * proto3 JSON (JSON names or .proto names, integers as numbers or strings), answered with the
 * response in proto3 JSON, 200 when OK and 429 when OVER_LIMIT, as envoyproxy/ratelimit's
 * /json answers. The table of test/rls/compat-cases.ts is answered here as on the gRPC port,
 * and both doors count on the same counters. Bad input is 400 naming the field, and nothing
 * of it is counted; the API keys and their scopes are those of POST /limit.
 */
import t from "tap";
import { clearOfWindowEnd } from "../../harness/contract.js";
import { closeAgents, request, TEST_KEY, type Reply } from "../../harness/http-client.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { COMPAT_CASES, COMPAT_POLICY, observedStatus, type CaseCall } from "../../rls/compat-cases.js";
import { oneDescriptor, rlsClient } from "../../rls/rls-client.js";
import { policyDir } from "../../harness/policy-dir.js";

t.teardown(closeAgents);

const SCOPED_KEY = "svc_sk_" + "sc0p3dK3yF0rTh3H1tsD0m41nOnlyXXXXXXXXX";

/**
 * A call of the table in proto3 JSON. `protoNames`: the .proto's field names instead of the
 * JSON names, and integers as strings (proto3 JSON parsers take both, and so must we).
 */
function jsonRequest(call: CaseCall, protoNames: boolean): Record<string, unknown> {
  const name = (json: string, proto: string) => (protoNames ? proto : json);
  const int = (n: number) => (protoNames ? String(n) : n);
  return {
    domain: call.domain,
    ...(call.hitsAddend === undefined ? {} : { [name("hitsAddend", "hits_addend")]: int(call.hitsAddend) }),
    descriptors: call.descriptors.map((d) => ({
      entries: d.entries.map(([key, value]) => ({ key, value })),
      ...(d.limit === undefined ? {} : { limit: { [name("requestsPerUnit", "requests_per_unit")]: int(d.limit.requestsPerUnit), unit: d.limit.unit } }),
      ...(d.hitsAddend === undefined ? {} : { [name("hitsAddend", "hits_addend")]: int(d.hitsAddend) }),
      ...(d.negative === undefined ? {} : { [name("isNegativeHits", "is_negative_hits")]: d.negative }),
    })),
  };
}

t.test("POST /json", async (t) => {
  const dir = policyDir(t, COMPAT_POLICY);
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir, API_KEYS: `${TEST_KEY},${SCOPED_KEY}@hits` });
  t.teardown(() => node.kill());
  const post = (body: unknown, key: string | null = TEST_KEY, raw = false): Promise<Reply> =>
    request(node.url + "/json", {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
      body: raw ? (body as string) : JSON.stringify(body),
    });
  // The table's rules are hourly or daily: it must run inside one hour.
  await clearOfWindowEnd(3600, 60_000);

  t.test("envoyproxy/ratelimit's answers, call by call, in proto3 JSON", async (t) => {
    let i = 0;
    for (const c of COMPAT_CASES) {
      const protoNames = i++ % 2 === 1;
      const reply = await post(jsonRequest(c.call, protoNames));
      t.equal(reply.status, c.overall === "OK" ? 200 : 429, `${c.what}: HTTP status`);
      t.match(reply.headers["content-type"], /^application\/json/, `${c.what}: JSON`);
      const body = reply.json;
      t.equal(body.overallCode, c.overall, `${c.what}: overallCode`);
      t.same(body.statuses.map(observedStatus), c.statuses, `${c.what}: statuses`);
      for (const s of body.statuses) {
        t.notOk("current_limit" in s || "limit_remaining" in s, `${c.what}: JSON names only`);
        if (s.currentLimit === undefined) t.equal(s.durationUntilReset, undefined, `${c.what}: no rule, no durationUntilReset`);
        else t.match(s.durationUntilReset, /^\d+(\.\d{3})?s$/, `${c.what}: a Duration as proto3 JSON writes it`);
      }
    }
  });

  t.test("one pipeline: POST /json and the gRPC port count on the same counter", async (t) => {
    const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
    t.teardown(() => rls.close());
    const call = { domain: "hits", descriptors: [{ entries: [{ key: "bytes", value: "shared" }] }] };
    t.equal((await post({ ...call, hitsAddend: 3 })).json.statuses[0].limitRemaining, 7);
    const grpc = await rls.shouldRateLimit(oneDescriptor("hits", [["bytes", "shared"]]));
    t.equal(grpc.statuses[0].limit_remaining, 6, "gRPC sees what /json counted");
    t.equal((await post(call)).json.statuses[0].limitRemaining, 5, "and /json what gRPC counted");
  });

  t.test("bad input: 400 naming the field, and nothing counted", async (t) => {
    const good = { entries: [{ key: "bytes", value: "untouched" }] };
    const cases: [what: string, body: unknown, field: string][] = [
      ["not an object", [good], "request"],
      ["an unknown field", { domain: "hits", descriptors: [good], extra: 1 }, "extra"],
      ["a field by both names", { domain: "hits", descriptors: [good], hitsAddend: 1, hits_addend: 1 }, "hits_addend"],
      ["no domain", { descriptors: [good] }, "domain"],
      ["a domain that is not a string", { domain: 7, descriptors: [good] }, "domain"],
      ["no descriptors", { domain: "hits" }, "descriptors"],
      ["descriptors not an array", { domain: "hits", descriptors: good }, "descriptors"],
      ["hitsAddend negative", { domain: "hits", descriptors: [good], hitsAddend: -1 }, "hits_addend"],
      ["hitsAddend a fraction", { domain: "hits", descriptors: [good], hitsAddend: 1.5 }, "hits_addend"],
      ["hitsAddend not digits", { domain: "hits", descriptors: [good], hitsAddend: "4x" }, "hits_addend"],
      ["hitsAddend past uint32", { domain: "hits", descriptors: [good], hitsAddend: 4_294_967_296 }, "hits_addend"],
      ["an entry without key", { domain: "hits", descriptors: [good, { entries: [{ value: "v" }] }] }, "descriptors[1].entries[0].key"],
      ["an entry value not a string", { domain: "hits", descriptors: [good, { entries: [{ key: "k", value: 5 }] }] }, "descriptors[1].entries[0].value"],
      ["a descriptor without entries", { domain: "hits", descriptors: [good, {}] }, "descriptors[1].entries"],
      ["a descriptor's unknown field", { domain: "hits", descriptors: [good, { ...good, limits: {} }] }, "descriptors[1].limits"],
      [
        "a limit's unknown unit",
        { domain: "hits", descriptors: [good, { ...good, limit: { requestsPerUnit: 1, unit: "WEEK" } }] },
        "descriptors[1].limit.unit",
      ],
      ["a limit without unit", { domain: "hits", descriptors: [good, { ...good, limit: { requestsPerUnit: 1 } }] }, "descriptors[1].limit.unit"],
      [
        "a limit past the bound",
        { domain: "hits", descriptors: [good, { ...good, limit: { requestsPerUnit: 4_294_967_296, unit: "SECOND" } }] },
        "descriptors[1].limit.requests_per_unit",
      ],
      [
        "a descriptor's hitsAddend as a wrapper object",
        { domain: "hits", descriptors: [good, { ...good, hitsAddend: { value: 1 } }] },
        "descriptors[1].hits_addend",
      ],
    ];
    for (const [what, body, field] of cases) {
      const reply = await post(body);
      t.equal(reply.status, 400, `${what}: 400`);
      t.same(
        reply.json?.data?.details?.map((d: { field: string }) => d.field),
        [field],
        `${what}: names ${field} (${reply.text.slice(0, 200)})`,
      );
    }
    const notJson = await post("{", TEST_KEY, true);
    t.equal(notJson.status, 400, "a body that is not JSON");
    const after = await post({ domain: "hits", descriptors: [good] });
    t.equal(after.json.statuses[0].limitRemaining, 9, "the good descriptor of every refused call was never counted");
  });

  t.test("the API keys of POST /limit, scoped keys held to their domain", async (t) => {
    const call = (domain: string) => ({ domain, descriptors: [{ entries: [{ key: "bytes", value: "keyed" }] }] });
    t.equal((await post(call("hits"), null)).status, 401, "no key");
    t.equal((await post(call("hits"), "svc_sk_" + "wrongwrongwrongwrongwrongwrongwrong")).status, 401, "a wrong key");
    const scoped = await post(call("hits"), SCOPED_KEY);
    t.equal(scoped.status, 200, "a key scoped to hits may ask about the domain hits");
    t.equal(scoped.json.statuses[0].limitRemaining, 9);
    t.equal((await post(call("basic"), SCOPED_KEY)).status, 403, "but not about basic");
    t.equal((await post(call("hits"))).json.statuses[0].limitRemaining, 8, "the refused calls counted nothing");
  });

  t.test("hitsAddend as a string, a descriptor's own as a string, and 0 counts one", async (t) => {
    const d = (value: string, extra = {}) => ({ entries: [{ key: "bytes", value }], ...extra });
    let reply = await post({ domain: "hits", hitsAddend: "4", descriptors: [d("s1"), d("s2", { hitsAddend: "2" })] });
    t.same(
      reply.json.statuses.map((s: { limitRemaining: number }) => s.limitRemaining),
      [6, 8],
    );
    reply = await post({ domain: "hits", hitsAddend: 0, descriptors: [d("s1")] });
    t.equal(reply.json.statuses[0].limitRemaining, 5, "hitsAddend 0 counts 1");
    reply = await post({ domain: "hits", hits_addend: null, descriptors: [d("s1", { limit: null })] });
    t.equal(reply.json.statuses[0].limitRemaining, 4, "null is unset");
  });
});
