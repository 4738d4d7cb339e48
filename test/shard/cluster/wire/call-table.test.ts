/**
 * The CALL method table (src/shard/cluster/wire/call-methods.ts) against the three places that
 * must agree with it: the receiver's handlers (routing/inbound-calls.ts), the protocol features
 * of peer/wire/constants.ts (FEATURE_VERSIONS), and docs/peer-protocol.md's "CALL methods".
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { ROOT } from "../../../harness/paths.js";
import { CALLS, CallMethod, type CallName } from "../../../../src/shard/cluster/wire/call-methods.js";
import { ANSWERED_METHODS } from "../../../../src/shard/cluster/routing/inbound-calls.js";
import { FEATURE_VERSIONS, PROTOCOL_CALL } from "../../../../src/peer/wire/constants.js";

const rows = (Object.keys(CALLS) as CallName[]).map((name) => ({ name, ...CALLS[name] }) as { name: CallName; method: number; feature?: string });

t.test("one row per number, every number a u16 other than the link's own PROTOCOL_CALL, and the senders' names are the rows'", async (t) => {
  const numbers = rows.map((r) => r.method);
  t.equal(new Set(numbers).size, numbers.length, "no number twice");
  t.same(
    numbers.filter((n) => !Number.isInteger(n) || n <= PROTOCOL_CALL || n > 0xffff),
    [],
  );
  t.same(Object.fromEntries(rows.map((r) => [r.name, r.method])), { ...CallMethod });
  t.ok(rows.length >= 16, `${rows.length} rows`);
});

t.test("the receiver answers exactly the table's methods", async (t) => {
  t.same(
    [...ANSWERED_METHODS].sort((a, b) => a - b),
    rows.map((r) => r.method).sort((a, b) => a - b),
  );
});

t.test("a row's feature is a protocol feature, and a feature that says it added a CALL method is that row's", async (t) => {
  for (const r of rows.filter((r) => r.feature !== undefined)) t.ok(r.feature! in FEATURE_VERSIONS, `${r.name}: ${r.feature}`);
  const constants = readFileSync(path.join(ROOT, "src/peer/wire/constants.ts"), "utf8");
  const named = [...constants.matchAll(/\/\*\* CALL method (\d+)\b[^*]*\*\/\s*(\w+):/g)].map((m) => [Number(m[1]), m[2]!] as const);
  t.ok(named.length >= 3, `${named.length} features name their CALL method`);
  for (const [method, feature] of named) {
    t.equal(rows.find((r) => r.method === method)?.feature, feature, `FEATURE_VERSIONS.${feature} added method ${method}`);
  }
});

t.test("docs/peer-protocol.md lists every call: number, name, and the version it needs", async (t) => {
  const doc = readFileSync(path.join(ROOT, "docs/peer-protocol.md"), "utf8");
  const start = doc.indexOf("\n## CALL methods\n");
  t.ok(start > 0, 'the doc has a "CALL methods" section');
  const section = doc.slice(start + 1, doc.indexOf("\n## ", start + 1));
  const listed = [...section.matchAll(/^\| (\d+) \| ([A-Z_]+) \| ([^|]+?) \|/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]}`);
  const since = (feature: string | undefined) => (feature === undefined ? "all" : `${FEATURE_VERSIONS[feature as keyof typeof FEATURE_VERSIONS]} (${feature})`);
  const expected = [`${PROTOCOL_CALL} PROTOCOL_CALL ${since("RANGES")}`, ...rows.map((r) => `${r.method} ${r.name} ${since(r.feature)}`)];
  t.same(listed, expected);
});
