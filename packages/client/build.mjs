// Builds ringlimit-client: dist/esm (import) and dist/cjs (require), each with its .d.ts.
// Run by `npm run build` and by `prepack`, so a tarball packed from a fresh clone is built.
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(path.join(here, "dist"), { recursive: true, force: true });
for (const project of ["tsconfig.json", "tsconfig.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", path.join(here, project)], { stdio: "inherit" });
}
writeFileSync(path.join(here, "dist/cjs/package.json"), '{ "type": "commonjs" }\n');
