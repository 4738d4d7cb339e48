/**
 * ringlimit/client as a user of the server package imports it: the "exports" entries of
 * package.json resolve (Node's package self-reference) to the client package's build, load
 * with import and with require(), and ship .d.ts types (that src/client loads nothing of the
 * server is the architecture test's rule; package.process.test.ts installs the client package itself).
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import t from "tap";

const pkg = JSON.parse(readFileSync(createRequire(import.meta.url).resolve("../../../package.json"), "utf8")) as { exports: Record<string, unknown> };

t.test("every ./client export resolves, loads, and has its declarations", async (t) => {
  const subpaths = Object.keys(pkg.exports).filter((k) => k.startsWith("./client"));
  t.ok(subpaths.includes("./client"));
  for (const subpath of subpaths) {
    const specifier = "ringlimit" + subpath.slice(1);
    const url = import.meta.resolve(specifier);
    const mod = (await import(specifier)) as Record<string, unknown>;
    t.ok(Object.keys(mod).length > 0, `${specifier} exports something`);
    const types = fileURLToPath(url).replace(/\.js$/, ".d.ts");
    t.ok(existsSync(types), `${specifier}: ${types} exists`);
    t.notMatch(readFileSync(types, "utf8"), /uWebSockets/, "its types do not mention uWebSockets.js");
  }
  const client = (await import("ringlimit/client" as string)) as { RingLimitClient: unknown };
  t.type(client.RingLimitClient, "function");
  const required = createRequire(import.meta.url)("ringlimit/client") as { RingLimitClient: unknown };
  t.type(required.RingLimitClient, "function", "require() loads it too (the CommonJS build)");
});
