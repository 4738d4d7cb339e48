/**
 * Concurrency over RLS: a rule with `algorithm: concurrency` holds a slot per hit, and a
 * descriptor with is_negative_hits (Envoy's stream-done call) frees the key's oldest slots on
 * its owner. Driven through RlsService with a real policy file and a real owner's table.
 */
import { Registry } from "prom-client";
import t from "tap";
import { KeyScope } from "../../src/auth/api-keys.js";
import { loadPolicy } from "../../src/policy/policy.js";
import { RlsMetrics } from "../../src/rls/rls-metrics.js";
import { RlsService } from "../../src/rls/rls-service.js";
import type { RlsRequest, RlsResponse } from "../../src/rls/wire/messages.js";
import { LocalDecider } from "../../src/shard/local/local-decider.js";
import { StateTable } from "../../src/shard/table/state-table.js";
import { policyDir } from "../harness/policy-dir.js";

const dir = policyDir(t, {
  "llm.yaml": `domain: llm
descriptors:
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 2
      algorithm: concurrency
`,
});
const policy = loadPolicy(dir);
const local = new LocalDecider(new StateTable(1000, Date.now()));
const rls = new RlsService(
  { failOpen: true, shadowMode: false, allOrNothing: false, rateLimitHeaders: false },
  { decider: local, policy: () => policy, metrics: new RlsMetrics(new Registry()), countDegraded: () => {} },
);

function call(tenant: string, negative = false, hits?: number): Promise<RlsResponse> {
  const request: RlsRequest = {
    domain: "llm",
    descriptors: [
      {
        entries: [{ key: "tenant", value: tenant }],
        ...(negative ? { is_negative_hits: true } : {}),
        ...(hits !== undefined ? { hits_addend: { value: hits } } : {}),
      },
    ],
  };
  return new Promise((resolve, reject) =>
    rls.shouldRateLimit(request, KeyScope.ANY, (failure, response) => (failure ? reject(new Error(failure.message)) : resolve(response!))),
  );
}

t.test("a hit holds a slot; the stream-done call frees the oldest; a gateway that never sends it waits for the lapse", async (t) => {
  const OK = 1;
  const OVER = 2;
  t.equal((await call("a")).overall_code, OK);
  t.equal((await call("a")).overall_code, OK);
  const full = await call("a");
  t.equal(full.overall_code, OVER, "two in flight: the third is over");
  // A 60 s window: the slots lapse 60 to 75 s after they were taken.
  const wait = full.statuses[0]!.duration_until_reset!.seconds;
  t.ok(wait >= 59 && wait <= 75, `held until the lapse: ${wait} s`);
  t.equal((await call("a", true)).overall_code, OK, "the give-back answers OK");
  t.equal((await call("a")).overall_code, OK, "one slot freed, taken again");
  t.equal((await call("a")).overall_code, OVER);
  await call("a", true, 2);
  t.equal((await call("a")).overall_code, OK);
  t.equal((await call("a")).overall_code, OK, "two hits given back: two slots");
  t.equal((await call("a")).overall_code, OVER);
  await call("b", true, 2);
  t.equal((await call("b")).overall_code, OK, "a give-back with nothing held frees nothing and holds nothing");
  t.equal((await call("b")).overall_code, OK);
  t.equal((await call("b")).overall_code, OVER);
});
