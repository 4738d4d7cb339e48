/**
 * Every start a user runs fixes glibc's mmap threshold at the same value, and the benches start
 * nodes the same way (docs/operations.md, Memory): the image (Dockerfile ENV, which /bin/ratelimit
 * and the manifests inherit), `npm start`, and bench/lib/servers.mjs. Left to glibc, the threshold
 * rises to the largest block freed, and the state tables' freed growth steps stay in malloc's arena.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "../harness/paths.js";
import t from "tap";

const THRESHOLD = "131072";

t.test("the image, npm start and the benches' nodes set MALLOC_MMAP_THRESHOLD_ alike", async (t) => {
  const dockerfile = readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
  // the ENV of the last stage, the one the image runs
  const runStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  t.match(runStage, new RegExp(`^ENV (?:.*\\\\\\n)*\\s*MALLOC_MMAP_THRESHOLD_=${THRESHOLD}\\s*$`, "m"), "the image's ENV");
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  t.equal(pkg.scripts.start, `MALLOC_MMAP_THRESHOLD_=\${MALLOC_MMAP_THRESHOLD_:-${THRESHOLD}} node dist/src/main.js`, "npm start, unless the caller sets it");
  const servers = readFileSync(path.join(ROOT, "bench/lib/servers.mjs"), "utf8");
  t.match(servers, `process.env.BENCH_MMAP_THRESHOLD ?? '${THRESHOLD}'`, "the benches' nodes");
});
