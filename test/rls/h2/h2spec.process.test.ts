/**
 * Issue #41: h2spec (github.com/summerwind/h2spec, 145 cases of RFC 7540/9113 and RFC 7541)
 * against the gRPC port of a real node on each of its servers. The own server must fail no
 * case that node:http2 (nghttp2) passes. Measured: the own server failed 24 at first, then 1
 * (5.1.1 #2, a stream id below one already used), then none once the connection remembered
 * the ids a client skips (src/rls/h2/control.ts SkippedIds); node:http2 fails 11.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { spawnProtected } from "../../harness/child-processes.js";
import { freePort } from "../../harness/ports.js";
import { spawnNode } from "../../harness/node-process.js";
import { GO_CACHE, goInstall } from "../go-tools.js";

const H2SPEC = "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible";
/** each run is 20-50 s on a loaded machine; a case waits at most this for a frame */
const CASE_TIMEOUT_S = "2";

t.setTimeout(900_000);

/** The cases h2spec reports failed, as "package: description". */
async function failures(t: Test, binary: string, impl: string): Promise<string[]> {
  const port = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(port), GRPC_SERVER_IMPL: impl });
  const report = path.join(GO_CACHE, `h2spec-${impl}-${process.pid}.xml`);
  try {
    const run = spawnProtected(binary, ["-h", "127.0.0.1", "-p", String(port), "-o", CASE_TIMEOUT_S, "-j", report], { env: process.env, stdio: "ignore" });
    await run.closed; // exit 1 when a case fails: the report says which
  } finally {
    await node.kill();
  }
  const xml = readFileSync(report, "utf8");
  const failed: string[] = [];
  for (const m of xml.matchAll(/<testcase package="([^"]+)" classname="([^"]+)"[^>]*>\s*<(error|failure)/g)) failed.push(`${m[1]}: ${m[2]}`);
  t.ok(xml.includes("<testcase"), `h2spec ran against ${impl}`);
  return failed;
}

const built = await goInstall("h2spec", H2SPEC);

t.test("h2spec: the own server fails no case node:http2 passes", { skip: "skip" in built ? built.skip : false }, async (t) => {
  if (!("binary" in built)) return;
  const ours = await failures(t, built.binary, "ringlimit");
  const nodes = await failures(t, built.binary, "node-http2");
  t.comment(`ringlimit fails ${ours.length}: ${ours.join("; ")}`);
  t.comment(`node-http2 fails ${nodes.length}: ${nodes.join("; ")}`);
  t.same(
    ours.filter((c) => !nodes.includes(c)),
    [],
    "every case the own server fails, node:http2 fails too",
  );
  t.ok(ours.length <= nodes.length, `the own server fails ${ours.length}, node:http2 ${nodes.length}`);
});
