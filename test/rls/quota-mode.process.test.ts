/**
 * quota_mode and RESPONSE_DYNAMIC_METADATA on a real node process (docs/envoy.md, Quota mode):
 * a request is OVER_LIMIT only when every quota-mode descriptor is over, and the answer's
 * dynamic_metadata (a google.protobuf.Struct, read here by grpc-js) names the rule metadata
 * of the descriptors that passed; POST /json answers the same in proto3 JSON.
 */
import t from "tap";
import { clearOfWindowEnd, uniqueId } from "../harness/contract.js";
import { post, TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { rlsClient, type Message } from "./rls-client.js";
import { policyDir } from "../harness/policy-dir.js";

const POLICY = `domain: llm
descriptors:
  - key: plan
    value: free
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 2 }
    metadata: { name: free, tier: { rank: 1, models: [small] } }
  - key: plan
    value: paid
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 4 }
    metadata: { name: paid, tier: { rank: 2, burst: true } }
  - key: user
    rate_limit: { unit: day, requests_per_unit: 100 }
    metadata: { name: user }
`;

/** google.protobuf.Struct / Value as grpc-js decodes them (protobufjs's own well-known types: camelCase whatever keepCase says), back to plain data. */
function plain(value: Message): Message {
  if (value.fields !== undefined) return Object.fromEntries(Object.entries(value.fields).map(([k, v]) => [k, plain(v)]));
  if (value.structValue !== undefined) return plain(value.structValue);
  if (value.listValue !== undefined) return (value.listValue.values ?? []).map(plain);
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.numberValue !== undefined) return value.numberValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return null;
}

t.test("quota_mode: over only when every quota is over; dynamic_metadata names what passed", async (t) => {
  await clearOfWindowEnd(86_400, 120_000);
  const dir = policyDir(t, { "llm.yaml": POLICY });
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir, RESPONSE_DYNAMIC_METADATA: "true" });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());

  const user = uniqueId("u");
  const request = {
    domain: "llm",
    descriptors: [{ entries: [{ key: "plan", value: "free" }] }, { entries: [{ key: "plan", value: "paid" }] }, { entries: [{ key: "user", value: user }] }],
  };
  const answers: Message[] = [];
  for (let i = 0; i < 6; i++) answers.push(await rls.shouldRateLimit(request));
  // free (2) is over from the 3rd call, paid (4) from the 5th: OK while either has room.
  t.same(
    answers.map((a) => a.overall_code),
    ["OK", "OK", "OK", "OK", "OVER_LIMIT", "OVER_LIMIT"],
    "OVER_LIMIT once both quotas are over, not while one has room",
  );
  t.same(
    answers[2].statuses.map((s: Message) => s.code),
    ["OVER_LIMIT", "OK", "OK"],
    "each status still says which quota is over",
  );

  const entries = ["plan=free", "plan=paid", `user=${user}`].map((e) => ({ entries: [e] }));
  t.same(
    plain(answers[0].dynamic_metadata),
    { domain: "llm", descriptors: entries, metadata: { name: "free", tier: { rank: 1, models: ["small"], burst: true } } },
    "every descriptor passed: metadata merged in request order, the first value of a key kept, maps merged",
  );
  t.same(
    plain(answers[2].dynamic_metadata).metadata,
    { name: "paid", tier: { rank: 2, burst: true } },
    "the free quota is over: only the passing descriptors' metadata",
  );
  t.same(plain(answers[5].dynamic_metadata).metadata, { name: "user" }, "both quotas over: the user rule alone passed");

  // A rule not in quota mode that is over makes the answer OVER_LIMIT whatever the quotas say.
  const strict = await rls.shouldRateLimit({
    domain: "llm",
    hits_addend: 7,
    descriptors: [
      { entries: [{ key: "plan", value: "paid" }] },
      { entries: [{ key: "user", value: uniqueId("v") }], limit: { requests_per_unit: 1, unit: "DAY" } },
    ],
  });
  t.equal(strict.overall_code, "OVER_LIMIT", "an over descriptor outside quota mode is over");
  const md = plain(strict.dynamic_metadata) as Record<string, unknown>;
  t.equal(md.hitsAddend, 7, "the request's hitsAddend");
  t.same((md.descriptors as Message[])[1].limit, "requests_per_unit:1 unit:DAY", "a caller's limit");
  t.notOk("metadata" in md, "no rule metadata: the paid quota is over and the override carries none");

  // POST /json: the same answer in proto3 JSON (the Struct is the object itself).
  const json = await post(node.url, "/json", {
    domain: "llm",
    descriptors: [{ entries: [{ key: "plan", value: "free" }] }, { entries: [{ key: "user", value: user }] }],
  });
  t.equal(json.status, 429, "free quota over, the only quota: over");
  t.same(json.json.overallCode, "OVER_LIMIT");
  t.same(json.json.dynamicMetadata, { domain: "llm", descriptors: [{ entries: ["plan=free"] }, { entries: [`user=${user}`] }], metadata: { name: "user" } });
});

t.test("without RESPONSE_DYNAMIC_METADATA there is none; QUOTA_MODE puts every rule in quota mode", async (t) => {
  await clearOfWindowEnd(86_400, 120_000);
  const dir = policyDir(t, { "llm.yaml": POLICY });
  const grpcPort = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(grpcPort), POLICY_PATH: dir, QUOTA_MODE: "true" });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());
  const request = {
    domain: "llm",
    descriptors: [
      { entries: [{ key: "plan", value: "free" }] },
      { entries: [{ key: "user", value: uniqueId("w") }], limit: { requests_per_unit: 1, unit: "DAY" } },
    ],
  };
  const codes: string[] = [];
  let last: Message;
  for (let i = 0; i < 3; i++) codes.push((last = await rls.shouldRateLimit(request)).overall_code);
  // The override (1 a day) is over from the 2nd call and is a quota too; free (2) from the 3rd.
  t.same(codes, ["OK", "OK", "OVER_LIMIT"], "over once every descriptor, each a quota, is over");
  t.equal(last!.dynamic_metadata, undefined, "no dynamic_metadata unless asked");
});
