import t from "tap";
import { hash32 } from "../../../src/shard/ring/hash.js";
import { HashRing } from "../../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../../src/shard/ring/state-key.js";
import { prng } from "../../harness/prng.js";

const keys = (n: number, tag = "user") => Array.from({ length: n }, (_, i) => ringKeyOf(`tenant-${i % 97}`, `${tag}-${i}`));

t.test("order independence: every node given the same names builds the same ring", async (t) => {
  const members = ["10.0.0.3:7000", "10.0.0.1:7000", "10.0.0.2:7000", "[fd00::1]:7000"];
  const rnd = prng(11);
  const reference = new HashRing(members);
  t.same(reference.members, [...members].sort(), "members are kept sorted");
  for (let round = 0; round < 5; round++) {
    const shuffled = [...members].sort(() => rnd() - 0.5);
    const ring = new HashRing([...shuffled, shuffled[0]!]); // a duplicate name counts once
    t.same(ring.members, reference.members);
    const differ = keys(20_000).filter((k) => ring.owner(k) !== reference.owner(k));
    t.same(differ, [], `order ${shuffled.join(",")}: every key has the same owner`);
  }
});

t.test("balance: the busiest of 3–10 members owns within ~10% of its fair share", async (t) => {
  for (const style of [(i: number) => `10.0.0.${i + 1}:7000`, (i: number) => `node-${i}.ringlimit.svc:7001`, (i: number) => `127.0.0.1:${9000 + i}`]) {
    for (let n = 3; n <= 10; n++) {
      const ring = new HashRing(Array.from({ length: n }, (_, i) => style(i)));
      const sample = keys(20_000 * n);
      const owned = new Map<string, number>();
      for (const k of sample) owned.set(ring.owner(k)!, (owned.get(ring.owner(k)!) ?? 0) + 1);
      const fair = sample.length / n;
      const busiest = Math.max(...owned.values()) / fair;
      const idlest = Math.min(...owned.values()) / fair;
      t.equal(owned.size, n, `${style(0)} ×${n}: every member owns keys`);
      t.ok(busiest <= 1.12 && idlest >= 0.88, `${style(0)} ×${n}: shares ${idlest.toFixed(3)}–${busiest.toFixed(3)} of fair`);
    }
  }
});

t.test("wrap-around: a key past the last point belongs to the first point's member", async (t) => {
  // One point per member, so the points are known: hash32(`${name}#0`).
  const names = ["a:1", "b:1", "c:1"];
  const ring = new HashRing(names, 1);
  const points = names.map((name) => ({ name, point: hash32(name + "#0") })).sort((x, y) => x.point - y.point);
  const first = points[0]!;
  const last = points[points.length - 1]!;
  let past = 0;
  let before = 0;
  for (let i = 0; past < 20 || before < 20; i++) {
    const key = `k${i}`;
    const h = hash32(key);
    if (h > last.point) {
      past++;
      t.equal(ring.owner(key), first.name, `hash ${h} > last point ${last.point}: wraps to the first`);
    } else if (h <= first.point) {
      before++;
      t.equal(ring.owner(key), first.name, `hash ${h} ≤ first point: the first`);
    } else {
      const owner = points.find((p) => p.point >= h)!;
      t.equal(ring.owner(key), owner.name);
    }
  }
});

t.test("removing a member moves only its own keys; adding one takes keys only for itself", async (t) => {
  const ring = new HashRing(["n1:1", "n2:1", "n3:1", "n4:1"]);
  const smaller = ring.without("n3:1");
  t.equal(ring.without("absent:1"), ring, "removing a stranger returns the same ring");
  t.notOk(smaller.has("n3:1"));
  const bigger = new HashRing([...ring.members, "n5:1"]);
  for (const k of keys(20_000, "move")) {
    const before = ring.owner(k)!;
    const after = smaller.owner(k)!;
    if (before !== "n3:1" && before !== after) t.fail(`${k} moved from ${before} to ${after}`);
    const added = bigger.owner(k)!;
    if (added !== before && added !== "n5:1") t.fail(`${k} moved from ${before} to ${added}`);
  }
  t.pass("checked 20 000 keys");
});

t.test("an empty ring has no owner", async (t) => {
  t.equal(new HashRing([]).owner("k"), undefined);
  t.equal(new HashRing(["only:1"]).without("only:1").size, 0);
});

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

t.test("successors with zones: replicas on other zones first, then ring order; losing a zone keeps a copy", async (t) => {
  const members = ["a1:1", "a2:1", "b1:1", "b2:1"];
  const zones = new Map([
    ["a1:1", "zone-a"],
    ["a2:1", "zone-a"],
    ["b1:1", "zone-b"],
    ["b2:1", "zone-b"],
  ]);
  const plain = new HashRing(members);
  const zoned = new HashRing(members, undefined, zones);
  const out: string[] = [];
  const plainOut: string[] = [];
  let sameZoneInPlainOrder = 0;
  for (let i = 0; i < 2000; i++) {
    const key = `key-${i}`;
    t.equal(zoned.successors(key, 2, out), 2);
    t.equal(out[0], zoned.owner(key), "the owner does not depend on zones");
    t.equal(out[0], plain.owner(key), "nor does it change when zones are set");
    if (zones.get(out[0]!) === zones.get(out[1]!)) t.fail(`${key}: both copies in ${zones.get(out[0]!)}`);
    plain.successors(key, 2, plainOut);
    if (zones.get(plainOut[0]!) === zones.get(plainOut[1]!)) sameZoneInPlainOrder++;
    // The replica is the first member clockwise of the other zone: the plain order's first such member.
    const full: string[] = [];
    plain.successors(key, 4, full);
    t.equal(
      out[1],
      full.find((m) => zones.get(m) !== zones.get(out[0]!)),
    );
  }
  t.ok(sameZoneInPlainOrder > 500, `ring order alone put both copies in one zone for ${sameZoneInPlainOrder} of 2000 keys`);
  // Three copies on two zones: one per zone, then the ring order among the rest.
  t.equal(zoned.successors("k", 3, out), 3);
  t.not(zones.get(out[0]!), zones.get(out[1]!));
  const full: string[] = [];
  plain.successors("k", 4, full);
  t.equal(
    out[2],
    full.find((m) => m !== out[0] && m !== out[1]),
    "the third copy: next in ring order",
  );
  // Without zones (or unset ones), placement is the plain ring order.
  const unset = new HashRing(members, undefined, new Map(members.map((m) => [m, ""])));
  for (let i = 0; i < 200; i++) {
    unset.successors(`k${i}`, 3, out);
    plain.successors(`k${i}`, 3, plainOut);
    t.same(out.slice(0, 3), plainOut.slice(0, 3));
  }
  // One zone for everyone: ring order too.
  const one = new HashRing(members, undefined, new Map(members.map((m) => [m, "dc"])));
  one.successors("k", 2, out);
  plain.successors("k", 2, plainOut);
  t.same(out.slice(0, 2), plainOut.slice(0, 2));
  // A ring without one member keeps the zones of the others.
  t.equal(zoned.without("a1:1").zones.get("b1:1"), "zone-b");
});
