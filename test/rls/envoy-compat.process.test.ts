/**
 * Drop-in compatibility with envoyproxy/ratelimit, on the gRPC port of a real node process:
 * a real grpc-js client with Envoy's messages (the package's .proto files), a real POLICY_PATH
 * folder in envoyproxy/ratelimit's format, and the table of compat-cases.ts (basic, nested
 * depth, wildcards, share_threshold, shadow_mode, replaces, hits_addend, overrides, unlimited,
 * no match, unknown domain), each call answered as envoyproxy/ratelimit answers it.
 */
import t from "tap";
import { clearOfWindowEnd } from "../harness/contract.js";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { COMPAT_CASES, COMPAT_POLICY, observedStatus, type CaseCall } from "./compat-cases.js";
import { rlsClient, type Message } from "./rls-client.js";
import { policyDir } from "../harness/policy-dir.js";

const WINDOW_SECONDS: Record<string, number> = { HOUR: 3600, DAY: 86_400 };

/** A call of the table as grpc-js takes it (the .proto's field names). */
function grpcRequest(call: CaseCall): Message {
  return {
    domain: call.domain,
    ...(call.hitsAddend === undefined ? {} : { hits_addend: call.hitsAddend }),
    descriptors: call.descriptors.map((d) => ({
      entries: d.entries.map(([key, value]) => ({ key, value })),
      ...(d.limit === undefined ? {} : { limit: { requests_per_unit: d.limit.requestsPerUnit, unit: d.limit.unit } }),
      ...(d.hitsAddend === undefined ? {} : { hits_addend: { value: d.hitsAddend } }),
      ...(d.negative === undefined ? {} : { is_negative_hits: d.negative }),
    })),
  };
}

t.test("envoyproxy/ratelimit's answers, call by call, over gRPC", async (t) => {
  const dir = policyDir(t, COMPAT_POLICY);
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());
  // Every counted rule is hourly or daily: the table must run inside one hour.
  await clearOfWindowEnd(3600, 60_000);

  for (const c of COMPAT_CASES) {
    const res = await rls.shouldRateLimit(grpcRequest(c.call));
    t.equal(res.overall_code, c.overall, `${c.what}: overall_code`);
    t.same(res.statuses.map(observedStatus), c.statuses, `${c.what}: statuses`);
    res.statuses.forEach((s: Message, i: number) => {
      const limit = c.statuses[i]!.limit;
      if (limit === undefined) return t.equal(s.duration_until_reset, undefined, `${c.what}: no rule, no duration_until_reset`);
      const ms = Number(s.duration_until_reset.seconds ?? 0) * 1000 + Number(s.duration_until_reset.nanos ?? 0) / 1e6;
      t.ok(ms > 0 && ms <= WINDOW_SECONDS[limit.unit]! * 1000, `${c.what}: duration_until_reset ${ms} ms within the ${limit.unit}`);
    });
  }
});
