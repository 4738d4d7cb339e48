/**
 * A RateLimitConfig resource as the file loader reads it (convert.ts): envoyproxy/ratelimit's
 * mapping of the proto (config_xds.go), proto3 defaults absent, UNKNOWN units left out of
 * unlimited rules only, metadata as JSON, nesting bounded; and the reconnection backoff.
 */
import t from "tap";
import { compilePolicy, PolicyError } from "../../../src/policy/index.js";
import { backoffDelayMs } from "../../../src/policy/xds/backoff.js";
import { MAX_DESCRIPTOR_DEPTH, policyFileOf } from "../../../src/policy/xds/convert.js";

const descriptor = (fields: object) => ({
  key: "",
  value: "",
  rate_limit: null,
  descriptors: [],
  shadow_mode: false,
  detailed_metric: false,
  quota_mode: false,
  metadata: null,
  ...fields,
});
const policy = (fields: object) => ({ unit: "UNKNOWN", requests_per_unit: 0, unlimited: false, name: "", replaces: [], ...fields });

t.test("the fields map as envoyproxy/ratelimit maps them, and the file loader compiles the result", async (t) => {
  const resource = {
    name: "edge",
    domain: "edge",
    descriptors: [
      descriptor({
        key: "remote_address",
        rate_limit: policy({ unit: "MINUTE", requests_per_unit: 10, name: "per_ip" }),
        shadow_mode: true,
        quota_mode: true,
        detailed_metric: true,
        metadata: {
          fields: {
            team: { stringValue: "a" },
            n: { numberValue: 2 },
            on: { boolValue: true },
            l: { listValue: { values: [{ stringValue: "x" }] } },
            s: { structValue: { fields: {} } },
            z: { nullValue: 0 },
          },
        },
      }),
      descriptor({ key: "path", value: "/admin", rate_limit: policy({ unlimited: true }) }),
      descriptor({
        key: "user",
        descriptors: [descriptor({ key: "plan", value: "free", rate_limit: policy({ unit: "HOUR", requests_per_unit: 0, replaces: [{ name: "per_ip" }] }) })],
      }),
    ],
  };
  const file = policyFileOf(resource, 0);
  t.equal(file.name, "edge");
  t.same(JSON.parse(file.text), {
    domain: "edge",
    descriptors: [
      {
        key: "remote_address",
        rate_limit: { unit: "MINUTE", requests_per_unit: 10, name: "per_ip" },
        shadow_mode: true,
        detailed_metric: true,
        quota_mode: true,
        metadata: { team: "a", n: 2, on: true, l: ["x"], s: {}, z: null },
      },
      { key: "path", value: "/admin", rate_limit: { unlimited: true } },
      { key: "user", descriptors: [{ key: "plan", value: "free", rate_limit: { unit: "HOUR", requests_per_unit: 0, replaces: [{ name: "per_ip" }] } }] },
    ],
  });
  const compiled = compilePolicy([file]);
  const [ip, admin, plan] = compiled.matchRequest("edge", [
    [{ key: "remote_address", value: "1.2.3.4" }],
    [{ key: "path", value: "/admin" }],
    [
      { key: "user", value: "u" },
      { key: "plan", value: "free" },
    ],
  ]);
  t.equal(ip, undefined, "per_ip is dropped by the rule that replaces it, matched in the same request");
  const alone = compiled.matchRequest("edge", [[{ key: "remote_address", value: "1.2.3.4" }]])[0];
  t.match(alone?.rule, { limit: 10, duration: 60, unit: "minute", shadow: true, quotaMode: true, name: "per_ip" });
  t.match(admin?.rule, { unlimited: true });
  t.match(plan?.rule, { limit: 0, duration: 3600 });
  t.equal(policyFileOf({ ...resource, name: "" }, 3).name, "resource-3", "a resource without a name is named by its place");
});

t.test("what envoyproxy/ratelimit refuses is refused: a counted rule with no unit, an unlimited one with a unit", async (t) => {
  const refuse = (rate_limit: object, pattern: RegExp) =>
    t.throws(
      () => compilePolicy([policyFileOf({ name: "x", domain: "d", descriptors: [descriptor({ key: "k", rate_limit: policy(rate_limit) })] }, 0)]),
      pattern,
    );
  refuse({ requests_per_unit: 5 }, /invalid rate limit unit 'UNKNOWN'/);
  refuse({ unlimited: true, unit: "SECOND" }, /unlimited/);
});

t.test("nesting is bounded before it reaches the compiler", async (t) => {
  let deep = descriptor({ key: "k", rate_limit: policy({ unit: "SECOND", requests_per_unit: 1 }) });
  for (let i = 0; i < MAX_DESCRIPTOR_DEPTH; i++) deep = descriptor({ key: "k", descriptors: [deep] });
  t.throws(() => policyFileOf({ name: "deep", domain: "d", descriptors: [deep] }, 0), PolicyError);
  let metadata: object = { fields: {} };
  for (let i = 0; i < 40; i++) metadata = { fields: { a: { structValue: metadata } } };
  t.throws(() => policyFileOf({ name: "m", domain: "d", descriptors: [descriptor({ key: "k", metadata })] }, 0), /metadata nested/);
});

t.test("backoff: doubling from the initial wait up to the max, spread by ±50 %", async (t) => {
  t.equal(backoffDelayMs(0, 1000, 60_000, 0.5), 1000);
  t.equal(backoffDelayMs(3, 1000, 60_000, 0.5), 8000);
  t.equal(backoffDelayMs(0, 1000, 60_000, 0), 500, "-50 %");
  t.equal(backoffDelayMs(0, 1000, 60_000, 0.999), 1499, "+50 %");
  t.equal(backoffDelayMs(10, 1000, 60_000, 0.99), 60_000, "never past the max");
  t.equal(backoffDelayMs(5000, 1000, 60_000, 0.5), 60_000, "no overflow after many attempts");
});
