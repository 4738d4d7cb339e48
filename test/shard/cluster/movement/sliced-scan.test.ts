/**
 * forEachKeySliced (src/shard/cluster/movement/sliced-scan.ts): every key the table holds when the
 * pass starts, SCAN_SLICE per event-loop turn, other work running between slices; a visit
 * returning false ends the pass.
 */
import t from "tap";
import { forEachKeySliced, SCAN_SLICE } from "../../../../src/shard/cluster/movement/sliced-scan.js";
import { StateTable } from "../../../../src/shard/table/state-table.js";

const NOW = 1_800_000_000_000;
function tableOf(n: number): StateTable {
  const table = new StateTable(n + 10, NOW);
  for (let i = 0; i < n; i++) table.set("k" + i, { a: i, b: 0, c: 0, expiresAt: NOW / 1000 + 3600, origin: 1, born: 0 });
  return table;
}

t.test("every key once, a slice per turn, the loop free between slices", async (t) => {
  const n = 2 * SCAN_SLICE + 7;
  const table = tableOf(n);
  const seen = new Set<string>();
  const sizes: number[] = [];
  let turnsBetween = 0;
  let ticking = true;
  const tick = () => {
    turnsBetween++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const ticksAt: number[] = [];
  const done = await forEachKeySliced(table, (keys) => {
    ticksAt.push(turnsBetween);
    sizes.push(keys.length);
    for (const k of keys) seen.add(k);
  });
  ticking = false;
  t.equal(done, true, "a pass that ran to its end");
  t.same(sizes, [SCAN_SLICE, SCAN_SLICE, 7]);
  t.equal(seen.size, n, "every key, none twice");
  t.ok(ticksAt[1]! > ticksAt[0]! && ticksAt[2]! > ticksAt[1]!, `other work ran between slices (${ticksAt.join(", ")})`);
});

t.test("keys deleted after the start are still visited; keys added are not", async (t) => {
  const table = tableOf(SCAN_SLICE + 5);
  const seen: string[] = [];
  await forEachKeySliced(table, (keys) => {
    if (seen.length === 0) {
      table.delete("k" + (SCAN_SLICE + 1));
      table.set("added", { a: 0, b: 0, c: 0, expiresAt: NOW / 1000 + 3600, origin: 1, born: 0 });
    }
    seen.push(...keys);
  });
  t.ok(seen.includes("k" + (SCAN_SLICE + 1)), "listed before it was deleted");
  t.notOk(seen.includes("added"), "added after the listing");
  t.equal(seen.length, SCAN_SLICE + 5);
});

t.test("a visit returning false ends the pass", async (t) => {
  const table = tableOf(3 * SCAN_SLICE);
  let visits = 0;
  const done = await forEachKeySliced(table, () => ++visits < 2);
  t.equal(done, false);
  t.equal(visits, 2, "no slice after the one that said stop");
  t.equal(await forEachKeySliced(new StateTable(10, NOW), () => false), true, "an empty table: no visit, a complete pass");
});
