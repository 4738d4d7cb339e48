/**
 * A full concurrency key says when its NEXT slot frees (issue #41 item 4): the oldest held
 * lease's lapse, not the newest's, in the 429's `retry_after` and Retry-After, and in an RLS
 * OVER_LIMIT's duration_until_reset; also after a release freed the oldest slot and a later
 * holder took it. One real node process, over HTTP and its gRPC port.
 *
 * Leases of 4 s live in 1 s buckets, so two leases taken 1.1 s apart always lapse in
 * different seconds: which lapse an answer names is decided by that, not by a deadline.
 */
import t from "tap";
import { post, TEST_KEY } from "../../harness/http-client.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { sleep } from "../../harness/wait.js";
import { oneDescriptor, rlsClient, type Message } from "../../rls/rls-client.js";
import { policyDir } from "../../harness/policy-dir.js";

const D = 4;
const APART_MS = 1100;

const dir = policyDir(t, {
  "conc.yaml": `domain: conc
descriptors:
  - key: tenant
    rate_limit:
      unit: second
      unit_multiplier: ${D}
      requests_per_unit: 2
      algorithm: concurrency
`,
});

t.test("HTTP: retry_after and Retry-After name the oldest held lease's lapse, before and after a release", async (t) => {
  const node = await spawnNode({ POLICY_PATH: dir });
  t.teardown(() => node.kill());
  const key = { namespace: "conc", identifier: "h", limit: 2, duration: D, algorithm: "concurrency" };
  const acquire = () => post(node.url, "/limit", key);
  // The lapse (unix ms) a 429 names: when it was sent plus retry_after, within the round trip.
  const lapseNamed = async (): Promise<{ atLeast: number; atMost: number; header: number; seconds: number }> => {
    const before = Date.now();
    const r = await acquire();
    const after = Date.now();
    t.equal(r.status, 429, "full");
    const ms = r.json.data.retry_after * 1000;
    return { atLeast: before + ms, atMost: after + ms, header: Number(r.headers["retry-after"]), seconds: r.json.data.retry_after };
  };

  const a = await acquire();
  await sleep(APART_MS);
  const b = await acquire();
  t.equal(b.json.data.remaining, 0);
  t.ok(b.json.data.reset_time > a.json.data.reset_time, "b lapses a bucket after a");
  const first = await lapseNamed();
  const aLapse = a.json.data.reset_time * 1000;
  t.ok(first.atLeast - 5 <= aLapse && aLapse <= first.atMost + 5, `retry_after ${first.seconds} s names a's lapse, not b's`);
  t.equal(first.header, Math.max(1, Math.ceil(first.seconds)), "Retry-After: retry_after rounded up");

  // The second observation: a released slot taken again by a later holder.
  t.equal((await post(node.url, "/limit/release", { ...key, lease: a.json.data.lease })).json.data.released, true);
  await sleep(APART_MS);
  const c = await acquire();
  t.equal(c.status, 200, "the freed slot is taken");
  t.ok(c.json.data.reset_time > b.json.data.reset_time, "c lapses a bucket after b");
  const second = await lapseNamed();
  const bLapse = b.json.data.reset_time * 1000;
  t.ok(second.atLeast - 5 <= bLapse && bLapse <= second.atMost + 5, `retry_after ${second.seconds} s names b's lapse, now the oldest, not c's`);
  t.equal(second.header, Math.max(1, Math.ceil(second.seconds)), "Retry-After: retry_after rounded up");
});

t.test("RLS: an OVER_LIMIT concurrency descriptor's duration_until_reset is its next free slot", async (t) => {
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());
  const ask = () => rls.shouldRateLimit(oneDescriptor("conc", [["tenant", "g"]]));
  const untilMs = (m: Message) => {
    const d = m.statuses[0].duration_until_reset ?? {};
    return (d.seconds ?? 0) * 1000 + (d.nanos ?? 0) / 1e6;
  };
  // An OK's duration_until_reset is when the key is free again: the lapse of what it holds.
  const t0 = Date.now();
  const a = await ask();
  t.equal(a.overall_code, "OK");
  const aLapse = { atLeast: t0 + untilMs(a) - 1, atMost: Date.now() + untilMs(a) + 1 };
  await sleep(APART_MS);
  t.equal((await ask()).overall_code, "OK");
  const before = Date.now();
  const over = await ask();
  const after = Date.now();
  t.equal(over.overall_code, "OVER_LIMIT");
  const named = { atLeast: before + untilMs(over), atMost: after + untilMs(over) };
  t.ok(
    named.atLeast - 5 <= aLapse.atMost && aLapse.atLeast <= named.atMost + 5,
    `duration_until_reset ${untilMs(over)} ms names the first slot's lapse (within ${named.atLeast - 5 - aLapse.atLeast}..${named.atMost + 5 - aLapse.atMost} ms), not the second's`,
  );
});
