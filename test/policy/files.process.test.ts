/**
 * Reading POLICY_PATH from real files: a folder's *.yaml/*.yml files in name order, dot
 * entries skipped and symlinks followed (a ConfigMap's layout), and whatever is not a
 * small regular file refused at once, never read into memory or waited on.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { loadPolicy, MAX_POLICY_FILE_BYTES, readPolicyFiles } from "../../src/policy/index.js";

const folder = (t: Test) => {
  const dir = mkdtempSync(path.join(tmpdir(), "policy-files-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};
const RULE = (domain: string) => `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n`;

t.test("a folder: its *.yaml and *.yml files in name order; dot entries, other names and subfolders left alone", async (t) => {
  const dir = folder(t);
  writeFileSync(path.join(dir, "b.yml"), RULE("b"));
  writeFileSync(path.join(dir, "a.yaml"), RULE("a"));
  writeFileSync(path.join(dir, "notes.txt"), "not yaml");
  writeFileSync(path.join(dir, ".hidden.yaml"), "broken: [");
  mkdirSync(path.join(dir, "..2026_11_25_10_00_00.1"));
  writeFileSync(path.join(dir, "..2026_11_25_10_00_00.1", "c.yaml"), RULE("c"));
  symlinkSync("..2026_11_25_10_00_00.1", path.join(dir, "..data"));
  symlinkSync("..data/c.yaml", path.join(dir, "c.yaml"));
  mkdirSync(path.join(dir, "sub"));
  writeFileSync(path.join(dir, "sub", "d.yaml"), RULE("d"));
  t.same(
    readPolicyFiles(dir).map((f) => f.name),
    ["a.yaml", "b.yml", "c.yaml"],
  );
  const policy = loadPolicy(dir);
  for (const domain of ["a", "b", "c"]) t.ok(policy.matchRequest(domain, [[{ key: "k", value: "v" }]])[0], `domain ${domain}`);
  t.notOk(policy.matchRequest("d", [[{ key: "k", value: "v" }]])[0], "subfolders are not entered");
});

t.test("a file named directly is read whatever its name; an empty folder is a policy with no rules", async (t) => {
  const dir = folder(t);
  writeFileSync(path.join(dir, "policy.conf"), RULE("x"));
  t.ok(loadPolicy(path.join(dir, "policy.conf")).matchRequest("x", [[{ key: "k", value: "v" }]])[0]);
  const empty = path.join(dir, "empty");
  mkdirSync(empty);
  t.equal(loadPolicy(empty).version, "e3b0c44298fc");
  t.throws(() => loadPolicy(path.join(dir, "missing")), { message: `${path.join(dir, "missing")}: does not exist` });
});

t.test("a FIFO, a device and an oversized file are refused at once", async (t) => {
  const dir = folder(t);
  const fifo = path.join(dir, "fifo.yaml");
  execFileSync("mkfifo", [fifo]);
  const started = Date.now();
  t.throws(() => loadPolicy(fifo), { message: `${fifo}: is not a regular file (a FIFO); a policy file must be one` });
  t.throws(() => loadPolicy(dir), { message: `${fifo}: is not a regular file (a FIFO); a policy file must be one` }, "in a folder too");
  t.ok(Date.now() - started < 2000, "no wait for a writer");
  rmSync(fifo);
  symlinkSync("/dev/zero", path.join(dir, "zero.yaml"));
  t.throws(() => loadPolicy(dir), { message: `${path.join(dir, "zero.yaml")}: is not a regular file (a device); a policy file must be one` });
  rmSync(path.join(dir, "zero.yaml"));
  const big = path.join(dir, "big.yaml");
  writeFileSync(big, "# " + "x".repeat(MAX_POLICY_FILE_BYTES) + "\n");
  t.throws(() => loadPolicy(big), { message: `${big}: is ${MAX_POLICY_FILE_BYTES + 3} bytes, over the ${MAX_POLICY_FILE_BYTES} a policy file may have` });
  writeFileSync(big, Buffer.from([0x64, 0x3a, 0x20, 0xff, 0xfe, 0x0a]));
  t.throws(() => loadPolicy(big), { message: `${big}: is not UTF-8 text` });
});

t.test("a dangling symlink (a ConfigMap key removed mid-swap) is skipped", async (t) => {
  const dir = folder(t);
  writeFileSync(path.join(dir, "a.yaml"), RULE("a"));
  symlinkSync("..data/gone.yaml", path.join(dir, "gone.yaml"));
  t.same(
    readPolicyFiles(dir).map((f) => f.name),
    ["a.yaml"],
  );
});
