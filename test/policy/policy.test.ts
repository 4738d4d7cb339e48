/**
 * loadPolicy over the fixtures: every good file loads (and what it loads is checked in the
 * matching tests), every broken one is refused with one line naming the file and the problem.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { compilePolicy, EMPTY_POLICY, loadPolicy, PolicyError } from "../../src/policy/index.js";

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../test/policy/fixtures");
const broken = (name: string) => path.join(FIXTURES, "broken", name);

/** Each broken fixture and the one line it is refused with (after "<file>: "). */
const REFUSED: Record<string, string> = {
  "bad-yaml.yaml": "bad YAML at line 3, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]",
  "misspelled-key.yaml": "line 5: unknown key 'ratelimit' in a descriptors entry of test-domain",
  "misspelled-key2.yaml": "line 6: unknown key 'requestsperunit' in rate_limit of test-domain.key1",
  "misplaced-key.yaml": "line 4: unknown key 'shadow_mode' in rate_limit of test-domain.key1",
  "bad-unit.yaml": "line 5: invalid rate limit unit 'foo' (second, minute, hour, day, week, month, year; or duration: <seconds>)",
  "empty-domain.yaml": "line 1: empty domain",
  "empty-key.yaml": "line 5: descriptor has empty key (under test-domain.key1)",
  "empty-file.yaml": "config file cannot have empty domain (the file holds no domain and no overrides)",
  "duplicate-key.yaml": "line 6: duplicate descriptor composite key 'test-domain.key1_value1'",
  "duplicate-wildcard.yaml": "line 6: duplicate descriptor composite key 'test-domain.key1_a**'",
  "replaces-empty.yaml": "line 9: should not have an empty replaces entry (test-domain.key1)",
  "replaces-self.yaml": "line 9: replaces should not contain name of same descriptor (test-domain.key1 is 'first')",
  "unlimited-with-unit.yaml": "line 5: should not specify rate limit unit when unlimited (test-domain.key1)",
  "non-string-key.yaml": "line 1: key is not a string: 0.25",
  "non-string-value.yaml": "line 4: value must be a string, got 1.5",
  "list-value.yaml": "line 4: value must be a string, not a list",
  "non-map-list.yaml": "line 3: a descriptors entry of test-domain must be a map",
  "zero-unit-multiplier.yaml": "line 4: unit_multiplier must be an integer from 1 to 31536000, got 0",
  "missing-requests.yaml": "line 4: requests_per_unit is required (0 blocks every request) in test-domain.key1",
  "unit-and-duration.yaml": "line 4: give unit or duration, not both (test-domain.key1)",
  "duration-out-of-bounds.yaml": "line 4: duration must be an integer from 1 to 31536000, got 31536001",
  "unknown-algorithm.yaml": "line 4: unknown algorithm 'gcra' (fixed-window, sliding-window, token-bucket, leaky-bucket, concurrency)",
  "domain-and-overrides.yaml": "line 1: a document holds either domain and descriptors, or overrides: separate them with ---",
  "override-limit-out-of-bounds.yaml": "line 3: limit must be an integer from 0 to 1000000, got 1000001",
  "override-duration-out-of-bounds.yaml": "line 4: duration must be an integer from 1 to 31536000, got 0",
  "override-sets-nothing.yaml": "line 2: override #0 sets nothing: give a limit (0 blocks), or shadow: true",
  "override-duration-without-limit.yaml": "line 2: override #0: duration and algorithm go with a limit",
  "override-no-namespace.yaml": "line 2: override #0 needs a namespace",
  "override-unknown-key.yaml": "line 3: unknown key 'limt' in override #0",
  "override-identical.yaml": "override override-identical.yaml#1 repeats override-identical.yaml#0 (namespace 'checkout' identifier 'user-1')",
  "override-tie.yaml":
    "overrides override-tie.yaml#0 (namespace 'check*' identifier 'user-1') and override-tie.yaml#1 (namespace '*ckout' identifier 'user-1') tie: equally specific, and one key can match both",
  "override-tie-identifiers.yaml":
    "overrides override-tie-identifiers.yaml#0 (namespace 'checkout' identifier 'user-*') and override-tie-identifiers.yaml#1 (namespace 'checkout' identifier '*er-12') tie: equally specific, and one key can match both",
};

t.test("every broken fixture is refused with one line naming the file and the problem", async (t) => {
  for (const [name, problem] of Object.entries(REFUSED)) {
    const file = broken(name);
    t.throws(() => loadPolicy(file), new PolicyError(file, problem), name);
    try {
      loadPolicy(file);
    } catch (err) {
      t.equal((err as Error).message, `${file}: ${problem}`, `${name}: the message`);
      t.notMatch((err as Error).message, /\n/, `${name}: one line`);
    }
  }
});

t.test("a domain twice across files is refused, naming the second file", async (t) => {
  const folder = path.join(FIXTURES, "duplicate-domain");
  t.throws(() => loadPolicy(folder), { message: `${path.join(folder, "b.yaml")}: duplicate domain 'same' in config file` });
});

t.test("the good fixtures load together, as one folder", async (t) => {
  const policy = loadPolicy(path.join(FIXTURES, "good"));
  t.match(policy.version, /^[0-9a-f]{12}$/);
  t.equal(loadPolicy(path.join(FIXTURES, "good")).version, policy.version, "the same files give the same version");
  t.ok(policy.matchRequest("basic", [[{ key: "key2", value: "x" }]])[0], "a domain of one file");
  t.ok(policy.matchOverride("billing", "42"), "overrides of another");
});

t.test("the version is a hash of the files' names and texts, wherever they are", async (t) => {
  const a = compilePolicy([{ path: "/x/p.yaml", name: "p.yaml", text: "overrides: [{namespace: a, limit: 1}]\n" }]);
  const b = compilePolicy([{ path: "/elsewhere/p.yaml", name: "p.yaml", text: "overrides: [{namespace: a, limit: 1}]\n" }]);
  const c = compilePolicy([{ path: "/x/p.yaml", name: "p.yaml", text: "overrides: [{namespace: a, limit: 2}]\n" }]);
  const d = compilePolicy([{ path: "/x/q.yaml", name: "q.yaml", text: "overrides: [{namespace: a, limit: 1}]\n" }]);
  t.equal(a.version, b.version);
  t.not(a.version, c.version, "another text");
  t.not(a.version, d.version, "another name");
  t.equal(compilePolicy([]).version, "e3b0c44298fc", "no files: the hash of nothing");
  t.equal(EMPTY_POLICY.version, "none", "no POLICY_PATH");
  t.same(EMPTY_POLICY.matchRequest("any", [[{ key: "a", value: "b" }]]), [undefined]);
  t.equal(EMPTY_POLICY.matchOverride("a", "b"), undefined);
});

t.test("rules read as envoyproxy/ratelimit reads them, with our extensions", async (t) => {
  const policy = loadPolicy(path.join(FIXTURES, "good"));
  const rule = (domain: string, ...entries: [string, string][]) => policy.matchRequest(domain, [entries.map(([key, value]) => ({ key, value }))])[0]?.rule;
  t.match(rule("basic", ["key2", "v"]), { limit: 20, duration: 60, unit: "minute", algorithm: "fixed-window", unlimited: false, shadow: false });
  t.match(rule("basic", ["key2", "value2"]), { limit: 30, unit: "minute" }, "unit is case-insensitive");
  t.match(rule("basic", ["key3", "v"]), { duration: 3600, unit: "hour" });
  t.match(rule("basic", ["weekly", "v"]), { duration: 604_800, unit: "week" });
  t.match(rule("basic", ["monthly", "v"]), { duration: 2_592_000, unit: "month" });
  t.match(rule("basic", ["yearly", "v"]), { duration: 31_536_000, unit: "year" });
  t.match(rule("basic", ["remote_address", "50.0.0.5"]), { limit: 0 }, "0 blocks");
  t.match(rule("basic", ["status", "500"]), { limit: 2 }, "value: 500 is the text 500");
  t.match(rule("basic", ["internal", "x"]), { unlimited: true, unit: undefined });
  t.match(rule("extensions", ["sliding", "x"]), { algorithm: "sliding-window", duration: 60, unit: "minute" });
  t.match(rule("extensions", ["ninety", "x"]), { algorithm: "token-bucket", duration: 90, unit: undefined, limit: 9 });
  t.match(rule("extensions", ["five-minutes", "x"]), { duration: 300, unit: "minute" });
  t.match(rule("extensions", ["quota", "x"]), { quotaMode: true, algorithm: "leaky-bucket" });
  t.match(rule("shadow", ["service", "s"], ["user", "user-a"]), { shadow: true, limit: 10 });
  t.match(rule("shadow", ["service", "s"], ["user", "user-b"]), { shadow: false, limit: 20 });
  t.same(policy.matchOverride("billing", "43"), { limit: 1001, duration: undefined, algorithm: undefined, shadow: false, source: "overrides.yaml#1" });
});

t.test("aliases resolve where a field is read; an alias bomb in metadata (read for dynamic_metadata) is refused at once by the node bound", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "policy-alias-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"];
  for (let i = 1; i < 12; i++)
    bomb.push(
      `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(", ")}]`,
    );
  const file = path.join(dir, "aliases.yaml");
  writeFileSync(
    file,
    [
      "domain: aliases",
      "descriptors:",
      "  - key: k",
      "    value: &v shared",
      "    metadata:",
      ...bomb.map((l) => "      " + l),
      "    rate_limit: &r {unit: second, requests_per_unit: 3}",
      "  - key: other",
      "    value: *v",
      "    rate_limit: *r",
      "",
    ].join("\n"),
  );
  const started = performance.now();
  t.throws(() => loadPolicy(file), /more than 500000 YAML nodes once aliases are expanded/, "the bomb's 10^12 nodes are refused");
  t.ok(performance.now() - started < 1000, "at once: counted as read, never expanded in full");
  writeFileSync(file, readFileSync(file, "utf8").replace(/ {4}metadata:[\s\S]*?(?= {4}rate_limit: &r)/, "    metadata: {plan: *v, tags: [*v, *v]}\n"));
  const policy = loadPolicy(file);
  t.match(policy.matchRequest("aliases", [[{ key: "other", value: "shared" }]])[0]?.rule, { limit: 3, duration: 1 });
  t.same(
    policy.matchRequest("aliases", [[{ key: "k", value: "shared" }]])[0]?.rule.metadata,
    { plan: "shared", tags: ["shared", "shared"] },
    "aliases in metadata resolve",
  );
});
