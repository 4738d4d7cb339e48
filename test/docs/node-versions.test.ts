/**
 * The supported Node.js versions are said in several places that must agree: `engines` in
 * package.json, the "Supported Node.js versions" table of docs/node-versions.md (and README's short one), the Dockerfile's base image, the
 * Nodes that `.ci/run` installs, and the native binaries the two uWebSockets.js builds
 * actually ship (one per Node ABI), whose checksums docs/node-versions.md records.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

// Node's module ABI (process.versions.modules) per major, from Node's own ABI registry.
const ABI: Record<number, number> = { 18: 108, 20: 115, 21: 120, 22: 127, 23: 131, 24: 137, 25: 141 };

const engines = (JSON.parse(read("package.json")) as { engines: { node: string } }).engines.node;
const range = /^>=(\d+) <(\d+)$/.exec(engines);
const low = Number(range?.[1]);
const high = Number(range?.[2]); // first major not supported
const inRange = Array.from({ length: high - low }, (_, i) => low + i);
// A range cannot skip a major: the odd ones inside it are current releases, never LTS, and not supported.
const supported = inRange.filter((major) => major % 2 === 0);

// The preferred build (upstream v20.57, glibc 2.38) and the fallback for older glibc (src/http/uws.ts).
const BUILDS = { preferred: "node_modules/uWebSockets.js", fallback: "node_modules/uws-pack/dist/bin" } as const;
const linuxBinaries = (dir: string) => readdirSync(path.join(ROOT, dir)).filter((f) => /^uws_linux_\w+_\d+\.node$/.test(f));
const x64Abis = (dir: string) =>
  new Set(
    linuxBinaries(dir)
      .map((f) => /^uws_linux_x64_(\d+)\.node$/.exec(f)?.[1])
      .filter((abi): abi is string => abi !== undefined)
      .map(Number),
  );

t.test("engines is a plain major range", async (t) => {
  t.ok(range, `engines.node "${engines}" has the form ">=A <B"`);
  t.ok(low >= 22, "Node 20 and older are past end of life and not supported");
  t.same(supported, [22, 24], "the LTS majors allowed are 22 and 24");
});

t.test("the ABI table matches the Node running this test", async (t) => {
  const major = Number(process.versions.node.split(".")[0]);
  t.equal(ABI[major], Number(process.versions.modules), `Node ${major} is ABI ${process.versions.modules}`);
});

t.test("the builds ship what the table says", async (t) => {
  const preferred = x64Abis(BUILDS.preferred);
  const fallback = x64Abis(BUILDS.fallback);
  for (const major of supported) t.ok(preferred.has(ABI[major]!), `Node ${major} (ABI ${ABI[major]}) has a Linux x64 binary in the preferred build`);
  t.ok(fallback.has(ABI[low]!), `Node ${low} also has one in the fallback build, for hosts older than glibc 2.38`);
  t.notOk(fallback.has(ABI[24]!), "Node 24 has none in the fallback: it needs glibc 2.38");
  for (const odd of inRange.filter((m) => !supported.includes(m))) {
    t.notOk(preferred.has(ABI[odd]!) || fallback.has(ABI[odd]!), `Node ${odd} (ABI ${ABI[odd]}) has no binary: it does not start`);
  }
  t.ok(preferred.has(ABI[20]!) && fallback.has(ABI[20]!), "both ship Node 20's ABI 115: on 20 the server starts (docs/node-versions.md says so)");
});

t.test("every installed Linux binary has the checksum docs/node-versions.md records", async (t) => {
  const doc = read("docs/node-versions.md");
  const recorded = new Map([...doc.matchAll(/^\| `([^`]+\.node)` \| `([0-9a-f]{64})` \| `([0-9a-f]{40})` \|$/gm)].map((m) => [m[1]!, m[2]!]));
  const installed = Object.values(BUILDS).flatMap((dir) => linuxBinaries(dir).map((f) => path.join(dir, f).replace(/^node_modules\//, "")));
  t.ok(installed.length >= 20, `${installed.length} Linux binaries installed`);
  t.same([...recorded.keys()].sort(), installed.sort(), "the table lists exactly the installed Linux binaries");
  for (const file of installed) {
    const sha256 = createHash("sha256")
      .update(readFileSync(path.join(ROOT, "node_modules", file)))
      .digest("hex");
    t.equal(sha256, recorded.get(file), `${file} is the file that was checked`);
  }
});

/** A "| Node.js | Status |" table's rows after `heading` in `text`, as cells. */
function statusRows(text: string, heading: string): string[][] {
  const section = text.slice(text.indexOf(heading));
  return section
    .slice(0, section.indexOf("\n\n", section.indexOf("| Node.js |")))
    .split("\n")
    .filter((l) => l.startsWith("|") && !l.startsWith("| ---") && !l.startsWith("| Node.js"))
    .map((l) => l.split("|").map((c) => c.trim()));
}
const supportedIn = (rows: string[][]) =>
  rows
    .filter((r) => r[2]!.startsWith("**supported**"))
    .map((r) => Number.parseInt(r[1]!, 10))
    .sort((a, b) => a - b);

t.test("docs/node-versions.md's table says what engines says", async (t) => {
  const doc = read("docs/node-versions.md");
  const heading = "## Supported Node.js versions";
  t.ok(doc.includes("\n" + heading + "\n"), "the page has the section");
  const section = doc.slice(doc.indexOf(heading));
  const rows = statusRows(doc, heading);
  const row = (major: number) => rows.find((r) => Number.parseInt(r[1]!, 10) === major)?.[2] ?? "";
  t.same(supportedIn(rows), supported, "the rows marked supported are the LTS majors engines allows");
  t.match(row(24), /glibc 2\.38/, "Node 24's row says it needs glibc 2.38");
  t.match(row(23), /^\*\*not supported\*\*.*does not start/, "Node 23 is in the range but does not start, and the table says so");
  t.match(row(low - 2), /^\*\*not supported\*\*.*end of life/, `Node ${low - 2} is not supported, and the row says why`);
  t.match(row(low - 2), /EBADENGINE[\s\S]*starts and answers/, `and what truly happens on Node ${low - 2}`);
  t.match(row(high), /^\*\*not yet\*\*/, `Node ${high} and later are listed as not yet supported`);
  t.ok(section.includes("`engines` in package.json says `" + engines + "`"), "the text quotes engines");
});

t.test("README's short table marks the same majors supported and links the page", async (t) => {
  const readme = read("README.md");
  const heading = "## Supported Node.js versions";
  const rows = statusRows(readme, heading);
  t.same(supportedIn(rows), supported);
  t.match(rows.find((r) => r[1]!.startsWith("24"))?.[2] ?? "", /glibc 2\.38/, "Node 24's row says it needs glibc 2.38");
  const section = readme.slice(readme.indexOf(heading), readme.indexOf("\n## ", readme.indexOf(heading) + 1));
  t.ok(section.includes("(docs/node-versions.md)"), "and links docs/node-versions.md");
});

t.test("the Dockerfile and .ci/run run the supported majors", async (t) => {
  const image = /^ARG NODE_IMAGE=node:(\d+)-(\w+)/m.exec(read("Dockerfile"));
  t.equal(Number(image?.[1]), Math.max(...supported), `the Docker base image is the newest LTS, Node ${image?.[1]}`);
  t.equal(image?.[2], "trixie", "on Debian 13, whose glibc (2.41) loads the v20.57 build");
  const ci = read(".ci/run");
  const installed = [...new Set([...ci.matchAll(/\bnode@(\d+)\b/g)].map((m) => Number(m[1])))].sort();
  t.same(installed, supported, ".ci/run runs the suite on every supported major");
  t.match(ci, /^\.ci\/debian13 node@24\b/m, "Node 24 runs in the Debian 13 lane");
  t.match(read(".ci/debian13"), /debootstrap --variant=minbase trixie/, "whose root is Debian 13, made with debootstrap");
  t.notMatch(ci, /suite on the machine's Node/, "the suite does not run on whatever Node the machine has");
});

t.test("the client package works from Node 20 on", async (t) => {
  const client = JSON.parse(read("packages/client/package.json")) as { engines: { node: string } };
  const floor = /^>=(\d+)\./.exec(client.engines.node);
  t.ok(floor && Number(floor[1]) <= 20, `ringlimit-client's engines (${client.engines.node}) still allows Node 20`);
});
