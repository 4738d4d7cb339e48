/**
 * The repository stands alone: no file points outside it (to a shared folder beside the
 * clone, or to numbered sections of a design document a clone does not have); comments
 * cite docs/ instead.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "../harness/paths.js";
import t from "tap";

const SKIP = new Set(["node_modules", "dist", ".git", ".tap", "package-lock.json"]);

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* files(full);
    else if (/\.(ts|mjs|js|json|md|ya?ml|sh|txt)$|^(Dockerfile|run|debian13|LICENSE|\.taprc)$/.test(entry.name)) yield full;
  }
}

t.test("no file refers to documents outside the repository", async (t) => {
  const offenders: string[] = [];
  let checked = 0;
  // Built from parts so that this file does not match itself.
  const outside = new RegExp(["\\.\\./", "shared|DESIGN ", "§|rate-limit-service", "-spec|TOOL", "CHAIN\\.md"].join(""));
  for (const file of files(ROOT)) {
    checked++;
    const text = readFileSync(file, "utf8");
    text.split("\n").forEach((line, i) => {
      if (outside.test(line)) offenders.push(`${path.relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
    });
  }
  t.ok(checked > 50, `${checked} files checked`);
  t.same(offenders, [], "references to documents outside the repository");
});
