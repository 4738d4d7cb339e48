import t from "tap";
import { HashRing } from "../../../src/shard/cluster/ring.js";

t.test("successors: the owner first, then distinct members clockwise; the next owner when the owner leaves", async (t) => {
  const members = ["10.0.0.1:9000", "10.0.0.2:9000", "10.0.0.3:9000", "10.0.0.4:9000"];
  const ring = new HashRing(members);
  const out: string[] = [];
  let checked = 0;
  for (let i = 0; i < 2000; i++) {
    const key = `key-${i}`;
    const n = ring.successors(key, 3, out);
    const got = out.slice(0, n);
    if (n !== 3 || new Set(got).size !== 3 || got[0] !== ring.owner(key)) t.fail(`${key}: ${got.join(",")}`);
    // The first replica is exactly the member that owns the key once the owner is gone:
    // that is what makes a promoted replica the new owner without moving anything.
    if (ring.without(got[0]!).owner(key) !== got[1]) t.fail(`${key}: replica 1 is not the next owner`);
    if (ring.without(got[0]!).without(got[1]!).owner(key) !== got[2]) t.fail(`${key}: replica 2 is not the owner after that`);
    checked++;
  }
  t.equal(checked, 2000);
  t.equal(ring.successors("k", 10, out), 4, "never more than the members");
  t.equal(new HashRing([]).successors("k", 2, out), 0, "an empty ring has none");
  t.equal(new HashRing(["solo"]).successors("k", 2, out), 1);
});
