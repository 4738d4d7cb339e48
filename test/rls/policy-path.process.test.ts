/**
 * POLICY_PATH reaches the gRPC door of a real node process: a rule of the file is what a
 * descriptor is counted against, and an edit of the file is in force without a restart
 * (docs/policy.md, Reload).
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { eventually } from "../harness/wait.js";
import { metric } from "../harness/cluster.js";
import { oneDescriptor, rlsClient } from "./rls-client.js";

const rule = (perMinute: number) => `domain: edge
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: ${perMinute}
`;

t.test("a rule of POLICY_PATH decides, and an edit of the file lands without a restart", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-policy-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "edge.yaml");
  writeFileSync(file, rule(2));
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());

  const ask = (user: string) => rls.shouldRateLimit(oneDescriptor("edge", [["user", user]]));
  const codes: string[] = [];
  for (let i = 0; i < 3; i++) codes.push((await ask("alice")).overall_code);
  t.same(codes, ["OK", "OK", "OVER_LIMIT"], "the file's 2 per minute is the limit");
  const first = await ask("bob");
  t.equal(first.statuses[0].current_limit.requests_per_unit, 2);
  t.equal(first.statuses[0].limit_remaining, 1);

  // Written beside the file and renamed over it, as editors and kubelet do: never half a file.
  writeFileSync(path.join(dir, ".edge.tmp"), rule(5));
  renameSync(path.join(dir, ".edge.tmp"), file);
  const raised = await eventually(async () => (await ask("carol")).statuses[0].current_limit?.requests_per_unit === 5, 15_000);
  t.ok(raised, "the new limit is in force without a restart");
  // alice keeps what she used: 3 counted of 5 under the new rule (the OVER_LIMIT hit was
  // counted too, as envoyproxy/ratelimit counts every hit: RLS_COUNT_BLOCKED).
  const again = await ask("alice");
  t.equal(again.overall_code, "OK");
  t.equal(again.statuses[0].limit_remaining, 1, "what was counted is kept: 5 - 3 - 1");

  writeFileSync(file, "domain: edge\ndescriptors: [ { key: user, rate_limit: { unit: fortnight, requests_per_unit: 1 } } ]\n");
  // The watcher has read the broken file once it has counted a failed load.
  const refused = await eventually(async () => (await metric(node, "ringlimit_policy_loads_total", '{result="error"}')) === 1, 15_000);
  t.ok(refused, "the broken edit was read and refused");
  const kept = await ask("dave");
  t.equal(kept.statuses[0].current_limit.requests_per_unit, 5, "a broken edit keeps the last good policy");
});
