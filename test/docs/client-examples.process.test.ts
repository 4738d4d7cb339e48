/**
 * The TypeScript examples of docs/client.md compile under `strict` against the client's own
 * source, as an app that copies them would compile them (issue #41: the Express example did
 * not). Every ```ts block that imports the client is checked; the names an example leaves to
 * the app (the caller's `userId`, Fastify's `reply`) are declared in a preamble.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");
const PREAMBLE =
  "declare const userId: string;\ndeclare const reply: { code(status: number): { header(name: string, value: string | undefined): unknown } };\n";

t.test("docs/client.md's TypeScript examples type-check under strict", async (t) => {
  const doc = readFileSync(path.join(ROOT, "docs/client.md"), "utf8");
  const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => /^import .* from "ringlimit-client/m.test(b));
  t.ok(blocks.length >= 2, `examples found: ${blocks.length}`);
  // Inside the package (type: module, its node_modules) so imports resolve as in an app.
  const dir = mkdtempSync(path.join(ROOT, ".doc-examples-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const files = blocks.map((block, i) => {
    const file = path.join(dir, `example-${i}.ts`);
    const source = block
      .replace(/"ringlimit-client\/(fastify|express|hono)"/g, '"../src/client/middleware/$1.js"')
      .replace(/"ringlimit-client"/g, '"../src/client/index.js"');
    writeFileSync(file, PREAMBLE + source);
    return file;
  });
  const run = spawnSync(
    process.execPath,
    [
      TSC,
      "--noEmit",
      "--strict",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      "--target",
      "es2022",
      "--skipLibCheck",
      "--types",
      "node",
      ...files,
    ],
    { cwd: ROOT, encoding: "utf8" },
  );
  t.equal(run.status, 0, `tsc: ${run.stdout}${run.stderr}`);
});
