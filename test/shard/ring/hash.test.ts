import t from "tap";
import { hash32 } from "../../../src/shard/ring/hash.js";

/** FNV-1a 32 over UTF-16 code units and MurmurHash3's fmix32, written independently with BigInt. */
function reference(s: string, seed = 0x811c9dc5n): number {
  const M = 0xffffffffn;
  let h = seed;
  for (let i = 0; i < s.length; i++) h = ((h ^ BigInt(s.charCodeAt(i))) * 0x01000193n) & M;
  h ^= h >> 16n;
  h = (h * 0x85ebca6bn) & M;
  h ^= h >> 13n;
  h = (h * 0xc2b2ae35n) & M;
  h ^= h >> 16n;
  return Number(h);
}

/** The FNV-1a part alone, to check the reference against published FNV test vectors. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5n;
  for (let i = 0; i < s.length; i++) h = ((h ^ BigInt(s.charCodeAt(i))) * 0x01000193n) & 0xffffffffn;
  return Number(h);
}

t.test("the reference is FNV-1a (published vectors)", async (t) => {
  t.equal(fnv1a(""), 0x811c9dc5);
  t.equal(fnv1a("a"), 0xe40c292c);
  t.equal(fnv1a("foobar"), 0xbf9cf968);
});

t.test("hash32 is FNV-1a + fmix32, over UTF-16 code units, with and without a seed", async (t) => {
  for (const s of ["", "a", "foobar", "8:api.produser-42", "é", "e\u0301", "用户", "😀", "\ud800", "x".repeat(600)]) {
    t.equal(hash32(s), reference(s), JSON.stringify(s));
    t.equal(hash32(s, 12345), reference(s, 12345n), `${JSON.stringify(s)} seeded`);
  }
  t.not(hash32("é"), hash32("e\u0301"), "no normalisation: distinct code units, distinct hashes");
  t.not(hash32("key", 1), hash32("key", 2), "the seed changes the placement");
});

t.test("keys differing only in their last character spread over the whole range", async (t) => {
  const buckets = new Array<number>(64).fill(0);
  const n = 64_000;
  for (let i = 0; i < n; i++) buckets[hash32(`8:api.produser-${i}`) >>> 26]!++;
  const expected = n / 64;
  t.ok(
    Math.max(...buckets) < expected * 1.15 && Math.min(...buckets) > expected * 0.85,
    `64 buckets: ${Math.min(...buckets)}–${Math.max(...buckets)} (expected ${expected})`,
  );
  // Avalanche: one changed last character flips about half of the 32 bits.
  let flipped = 0;
  for (let i = 0; i < 10_000; i++) {
    let x = (hash32(`id-${i}a`) ^ hash32(`id-${i}b`)) >>> 0;
    for (; x !== 0; x &= x - 1) flipped++;
  }
  const mean = flipped / 10_000;
  t.ok(mean > 15 && mean < 17, `mean bits flipped: ${mean.toFixed(2)}`);
});
