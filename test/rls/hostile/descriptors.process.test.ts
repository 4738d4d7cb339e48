/**
 * Issue #33, requests that are costly to read, on a 3-node ring: 1 MiB of 4-byte
 * descriptors (with a key), the 65th descriptor inside the message bound, and text that is
 * not well-formed Unicode at both doors (POST /json with a lone surrogate, gRPC with bytes
 * that are not UTF-8). Each is refused naming the field; meanwhile /health answers, no
 * member drops another, nothing fails open, and a legitimate call over its limit of 1
 * stays OVER_LIMIT.
 */
import t from "tap";
import { post, TEST_KEY } from "../../harness/http-client.js";
import {
  assertResponsive,
  beside,
  call,
  connect,
  degradedTotal,
  descriptor,
  GRPC,
  grpcFrame,
  overallCode,
  rlsRequest,
  SHOULD_RATE_LIMIT,
  startRlsCluster,
  lenField,
} from "./harness.js";

const AUTH = { authorization: `Bearer ${TEST_KEY}` };
const OK = 1;
const OVER_LIMIT = 2;

t.test("hostile requests on a 3-node ring are refused without hurting it", async (t) => {
  // The size bound, not the deadline, must answer the 1 MiB calls. On node:http2 the rest of a
  // refused body is read and dropped, so the 8th call's head can queue behind 7 MiB on the one
  // connection: on a saturated machine (load 35) that took past the default 10 s deadline.
  const { cluster, grpcPorts } = await startRlsCluster(t, 3, { GRPC_DEFAULT_DEADLINE_MS: "60000" });
  const nodes = cluster.nodes.map((n) => n!);
  const degradedBefore = (await Promise.all(nodes.map(degradedTotal))).reduce((a, b) => a + b, 0);
  const session = await connect(grpcPorts[0]!);
  t.teardown(() => session.destroy());
  // a legitimate descriptor with a limit of 1 per minute, counted on its owner
  const legit = grpcFrame(rlsRequest("shop", [descriptor([["user", "ann"]], 1)]));
  t.equal(overallCode((await call(session, SHOULD_RATE_LIMIT, legit, AUTH)).messages[0]!), OK, "the first call is allowed");

  const fourByte = Buffer.from([0x12, 0x02, 0x0a, 0x00]);
  const mib = grpcFrame(Buffer.concat(Array.from({ length: (1 << 20) / 4 }, () => fourByte)));
  const inBound = grpcFrame(Buffer.concat(Array.from({ length: 16_000 }, () => fourByte)));
  const { result, beside: b } = await beside(nodes, async () => {
    const attack = await Promise.all(Array.from({ length: 8 }, () => call(session, SHOULD_RATE_LIMIT, mib, AUTH)));
    const counted = await Promise.all(Array.from({ length: 8 }, () => call(session, SHOULD_RATE_LIMIT, inBound, AUTH)));
    const again = await call(session, SHOULD_RATE_LIMIT, legit, AUTH);
    return { attack, counted, again };
  });
  t.ok(
    result.attack.every((r) => r.status === GRPC.RESOURCE_EXHAUSTED),
    `1 MiB: RESOURCE_EXHAUSTED (a request is at most 64 KiB): ${result.attack.map((r) => (r.reset ? "reset" : `${r.status} ${r.message}`)).join("; ")}`,
  );
  t.ok(
    result.counted.every((r) => r.status === GRPC.INVALID_ARGUMENT && r.message === "descriptors: at most 64 per request"),
    `16,000 descriptors in 64 KB: INVALID_ARGUMENT at the 65th (${result.counted[0]!.message})`,
  );
  t.equal(overallCode(result.again.messages[0]!), OVER_LIMIT, "the legitimate call past its limit of 1 is still OVER_LIMIT");
  t.equal(b.fewestMembers, 3, "no member dropped another");
  assertResponsive(t, b, "on the three nodes beside the attack");

  t.test("a lone surrogate in POST /json, a value that is not UTF-8 on gRPC: refused naming the field", async (t) => {
    const body = (value: string) =>
      `{"domain":"shop","descriptors":[{"entries":[{"key":"user","value":"${value}"}],"limit":{"requestsPerUnit":5,"unit":"MINUTE"}}]}`;
    const answers = await Promise.all(Array.from({ length: 45 }, () => post(nodes[1]!.url, "/json", body("bob\\ud800"))));
    t.same(new Set(answers.map((a) => a.status)), new Set([400]), "every one is 400");
    t.match(answers[0]!.text, /descriptors\[0\]\.entries\[0\]\.value/);
    t.match(answers[0]!.text, /well-formed/);
    const domain = await post(nodes[1]!.url, "/json", body("x").replace('"shop"', '"sh\\udfffop"'));
    t.equal(domain.status, 400);
    t.match(domain.text, /"domain"/);
    // CESU-8 of U+D800: what a lone surrogate looks like as bytes
    const notUtf8 = descriptor([["user", Buffer.from([0x62, 0xed, 0xa0, 0x80])]], 5);
    const r = await call(session, SHOULD_RATE_LIMIT, grpcFrame(rlsRequest("shop", [notUtf8])), AUTH);
    t.equal(r.status, GRPC.INVALID_ARGUMENT);
    t.match(r.message, /^descriptors\[0\]\.entries\[0\]\.value: must be well-formed/);
    const badKey = await call(session, SHOULD_RATE_LIMIT, grpcFrame(rlsRequest("shop", [lenField(1, lenField(1, Buffer.from([0xff])))])), AUTH);
    t.match(badKey.message, /^descriptors\[0\]\.entries\[0\]\.key: must be well-formed/);
    // the plain value: allowed 5 times, then over, as a limit of 5 says
    const plain = await Promise.all(Array.from({ length: 8 }, () => post(nodes[1]!.url, "/json", body("bob"))));
    t.equal(plain.filter((a) => a.status === 200).length, 5);
    t.equal(plain.filter((a) => a.status === 429).length, 3);
  });

  t.test("nothing failed open", async (t) => {
    const after = (await Promise.all(nodes.map(degradedTotal))).reduce((a, b) => a + b, 0);
    t.equal(after, degradedBefore);
  });
});
