/**
 * The supported Node.js versions are said in five places that must agree: `engines` in
 * package.json, README's "Supported Node.js versions" table, the Dockerfile's base image,
 * the Node that `.ci/run` installs, and the native binaries the uWebSockets.js build
 * actually ships (one per Node ABI). The upper bound of `engines` is the last ABI shipped.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

// Node's module ABI (process.versions.modules) per major, from Node's own ABI registry.
const ABI: Record<number, number> = { 18: 108, 20: 115, 21: 120, 22: 127, 23: 131, 24: 137 };

const engines = (JSON.parse(read("package.json")) as { engines: { node: string } }).engines.node;
const range = /^>=(\d+) <(\d+)$/.exec(engines);
const low = Number(range?.[1]);
const high = Number(range?.[2]); // first major not supported
const supported = Array.from({ length: high - low }, (_, i) => low + i);

t.test("engines is a plain major range", async (t) => {
  t.ok(range, `engines.node "${engines}" has the form ">=A <B"`);
  t.ok(low >= 22, "Node 20 and older are past end of life and not supported");
  t.ok(supported.length >= 1);
});

t.test("the ABI table matches the Node running this test", async (t) => {
  const major = Number(process.versions.node.split(".")[0]);
  t.equal(ABI[major], Number(process.versions.modules), `Node ${major} is ABI ${process.versions.modules}`);
});

t.test("the uWebSockets.js build ships every supported ABI and not the next one", async (t) => {
  const bin = path.join(ROOT, "node_modules/uWebSockets.js/dist/bin");
  const shipped = new Set(
    readdirSync(bin)
      .map((f) => /^uws_linux_x64_(\d+)\.node$/.exec(f)?.[1])
      .filter((abi): abi is string => abi !== undefined)
      .map(Number),
  );
  for (const major of supported) t.ok(shipped.has(ABI[major]!), `Node ${major} (ABI ${ABI[major]}) has a Linux x64 binary`);
  t.notOk(shipped.has(ABI[high]!), `Node ${high} (ABI ${ABI[high]}) has none: the upper bound <${high} is needed`);
});

t.test("README's table says what engines says", async (t) => {
  const readme = read("README.md");
  const section = readme.slice(readme.indexOf("## Supported Node.js versions"));
  const rows = section
    .slice(0, section.indexOf("\n\n", section.indexOf("| Node.js |")))
    .split("\n")
    .filter((l) => l.startsWith("|") && !l.startsWith("| ---") && !l.startsWith("| Node.js"))
    .map((l) => l.split("|").map((c) => c.trim()));
  const supportedRows = rows.filter((r) => r[2]!.startsWith("**supported**"));
  t.same(
    supportedRows.map((r) => Number.parseInt(r[1]!, 10)),
    supported,
    "the rows marked supported are the majors engines allows",
  );
  const older = rows.find((r) => r[2]!.startsWith("**not supported**"));
  t.ok(older && Number.parseInt(older[1]!, 10) === low - 2, `Node ${low - 2} is listed as not supported`);
  t.match(older?.[2], /end of life/, "and says why");
  const newer = rows.find((r) => r[2]!.startsWith("**not yet**"));
  t.ok(newer && Number.parseInt(newer[1]!, 10) === high, `Node ${high} and later are listed as not yet supported`);
  t.ok(section.includes("`engines` in package.json says `" + engines + "`"), "the text quotes engines");
  t.match(section, /### The way to Node 24[\s\S]*ABI 137[\s\S]*glibc 2\.38/, "the way to Node 24 names the ABI and the glibc it needs");
});

t.test("the Dockerfile and .ci/run use a supported major", async (t) => {
  const image = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(read("Dockerfile"));
  t.ok(image && supported.includes(Number(image[1])), `the Docker base image is Node ${image?.[1]}`);
  const ci = read(".ci/run");
  const installed = [...ci.matchAll(/\bnode@(\d+)\b/g)].map((m) => Number(m[1]));
  t.ok(installed.length >= 1, ".ci/run installs a Node from the registry");
  for (const major of installed) t.ok(supported.includes(major), `.ci/run installs Node ${major}`);
  t.notMatch(ci, /suite on the machine's Node/, "the suite no longer runs on whatever Node the machine has");
});
