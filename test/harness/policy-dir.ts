import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * A fresh folder holding the given policy files (file name → YAML text), removed when `t` ends:
 * what POLICY_PATH or loadPolicy() is pointed at.
 */
export function policyDir(t: { teardown(fn: () => void): void }, files: Readonly<Record<string, string>>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-policy-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}
