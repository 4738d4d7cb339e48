import t from "tap";
import { prng } from "../../harness/prng.js";
import { KeyIndex } from "../../../src/shard/table/key-index.js";

t.test("add, get, move and remove agree with a Map through growth and wrap-around", async (t) => {
  const keys: string[] = [];
  const index = new KeyIndex((slot) => keys[slot]!);
  const reference = new Map<string, number>();
  const rnd = prng(7);
  for (let step = 0; step < 50_000; step++) {
    const key = "key-" + Math.floor(rnd() * 5000);
    const slot = reference.get(key);
    if (slot === undefined) {
      keys.push(key);
      index.add(key, keys.length - 1);
      reference.set(key, keys.length - 1);
    } else if (rnd() < 0.5) {
      // remove, compacting by moving the last key into the hole, as the state table does
      index.remove(key, slot);
      reference.delete(key);
      const last = keys.length - 1;
      if (slot !== last) {
        const moved = keys[last]!;
        keys[slot] = moved;
        index.move(moved, last, slot);
        reference.set(moved, slot);
      }
      keys.length = last;
    }
    if (step % 997 === 0) {
      for (const [k, s] of reference) if (index.get(k) !== s) return void t.fail(`step ${step}: ${k} at ${index.get(k)}, expected ${s}`);
      if (index.get("absent-" + step) !== undefined) return void t.fail("found an absent key");
    }
  }
  t.equal(index.size, reference.size);
  for (const [k, s] of reference) if (index.get(k) !== s) return void t.fail(`${k} misplaced`);
  t.pass(`${reference.size} keys consistent after 50,000 random operations`);
});
