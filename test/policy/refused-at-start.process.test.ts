/**
 * A policy that does not load stops start-up of the real entry point: each kind of broken
 * file envoyproxy/ratelimit refuses ends `node dist/src/main.js` with one line on stderr that
 * names the file and the problem, before any port is opened. (What each message says in full
 * is policy.test.ts's; this is the process an operator starts.)
 */
import path from "node:path";
import t from "tap";
import { pool } from "../harness/contract.js";
import { TEST_KEY } from "../harness/http-client.js";
import { ROOT } from "../harness/paths.js";
import { runMain } from "../harness/run-main.js";

const FIXTURES = path.join(ROOT, "test/policy/fixtures");

/** [what, the POLICY_PATH under the fixtures, the file the line names, a piece of the problem] */
const BROKEN: [string, string, string, string][] = [
  ["bad YAML", "broken/bad-yaml.yaml", "broken/bad-yaml.yaml", "bad YAML at line 3"],
  ["an unknown key", "broken/misspelled-key.yaml", "broken/misspelled-key.yaml", "unknown key 'ratelimit'"],
  ["a bad unit", "broken/bad-unit.yaml", "broken/bad-unit.yaml", "invalid rate limit unit 'foo'"],
  ["a duplicate key", "broken/duplicate-key.yaml", "broken/duplicate-key.yaml", "duplicate descriptor composite key"],
  ["a duplicate domain across files", "duplicate-domain", "duplicate-domain/b.yaml", "duplicate domain 'same'"],
  ["an empty domain", "broken/empty-domain.yaml", "broken/empty-domain.yaml", "empty domain"],
  ["an empty key", "broken/empty-key.yaml", "broken/empty-key.yaml", "descriptor has empty key"],
  ["replaces with no name", "broken/replaces-empty.yaml", "broken/replaces-empty.yaml", "empty replaces entry"],
  ["replaces naming its own rule", "broken/replaces-self.yaml", "broken/replaces-self.yaml", "replaces should not contain name of same descriptor"],
  ["unlimited with a unit", "broken/unlimited-with-unit.yaml", "broken/unlimited-with-unit.yaml", "should not specify rate limit unit when unlimited"],
  ["a value that is not a string", "broken/non-string-value.yaml", "broken/non-string-value.yaml", "value must be a string"],
];

t.test("a broken policy file stops start-up with one line naming the file and the problem", async (t) => {
  await pool(BROKEN, 4, async ([what, policyPath, file, problem]) => {
    const run = await runMain([], {
      HOST: "127.0.0.1",
      PORT: "0",
      API_KEYS: TEST_KEY,
      LOG_LEVEL: "info",
      GRPC_PORT: "0",
      POLICY_PATH: path.join(FIXTURES, policyPath),
    });
    t.not(run.code, 0, `${what}: non-zero exit (${run.code})`);
    t.equal(run.signal, null, `${what}: exited by itself`);
    const lines = run.stderr.split("\n").filter((l) => l !== "");
    t.equal(lines.length, 1, `${what}: one line on stderr: ${JSON.stringify(run.stderr)}`);
    t.ok(lines[0]?.includes(path.join(FIXTURES, file) + ": "), `${what}: names the file: ${lines[0]}`);
    t.ok(lines[0]?.includes(problem), `${what}: says the problem: ${lines[0]}`);
    t.notMatch(run.stderr, /\bat .*\.js|node_modules/, `${what}: no stack trace`);
    t.equal(run.stdout, "", `${what}: nothing on stdout (no start-up)`);
  });
});
