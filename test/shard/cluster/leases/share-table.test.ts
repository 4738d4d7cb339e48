// The shares a member holds of keys other members own (shard/cluster/leases/share-table.ts):
// one per key and window, bounded in bytes without ever dropping a share of a window that has
// not ended (taking it again would count it twice), topped up by grants and returning them idle.
import t from "tap";
import { MISS_RUN_MS, NO_SHARE, SHARE_KEEP_MS, ShareTable } from "../../../../src/shard/cluster/leases/share-table.js";

const T0 = 1_800_000_000_000;
const W = 60_000;
const keepUntil = (start: number) => start + W + SHARE_KEEP_MS;

t.test("a share is taken once per window; a new window opens a fresh one", async (t) => {
  const table = new ShareTable(1 << 20);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0, 1), 15);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 15, true, T0, 1), 0);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0, 1), NO_SHARE, "used up: ask the owner");
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 0, true, T0, 1), NO_SHARE, "a peek too");
  t.equal(table.take("k", T0 + W, keepUntil(T0 + W), 2048, 16, 1, true, T0 + W, 1), 15, "the next window");
  t.equal(
    table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0 + W, 1),
    NO_SHARE,
    "an earlier window once a later one is open (the owner's clock read back)",
  );
  t.equal(table.take("k", T0 + W, keepUntil(T0 + W), 4096, 32, 1, true, T0 + W, 1), NO_SHARE, "another limit asks the owner");
  t.equal(table.take("new", T0, keepUntil(T0), 2048, 16, 1, false, T0, 1), NO_SHARE, "without the rule, the share opens empty");
  t.ok(table.grant("new", T0, 16, T0 + 1, 1), "and a grant fills it");
  t.equal(table.take("new", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 2, 1), 15, "the rule does not add to a window already open");
});

t.test("misses come in runs: only requests that reach the owner within MISS_RUN_MS of each other make a run (a hot key)", async (t) => {
  const table = new ShareTable(1 << 20);
  const miss = (at: number) => table.take("k", T0, keepUntil(T0), 2048, 16, 1, false, at, 1);
  t.equal(miss(T0), NO_SHARE);
  t.equal(table.entry("k")!.misses, 1, "a key seen once");
  t.equal(miss(T0 + MISS_RUN_MS + 1), NO_SHARE);
  t.equal(table.entry("k")!.misses, 1, "seen again later: a new run, not a hot key");
  t.equal(miss(T0 + MISS_RUN_MS + 2), NO_SHARE);
  t.equal(table.entry("k")!.misses, 2, "twice in a row: a run of two");
  t.equal(table.take("k", T0 + W, keepUntil(T0 + W), 2048, 16, 1, false, T0 + W, 1), NO_SHARE);
  t.equal(table.entry("k")!.misses, 1, "a new window starts over");
});

t.test("bounded in bytes: a full table refuses new keys until their windows end, and never drops a current share", async (t) => {
  const table = new ShareTable(4096);
  let held = 0;
  for (let i = 0; i < 1000; i++) if (table.take(`key-${i}`, T0, keepUntil(T0), 2048, 16, 1, true, T0, 1) !== NO_SHARE) held++;
  t.ok(held > 5 && held < 1000, `${held} shares in 4 KiB`);
  t.ok(table.bytes <= 4096);
  t.equal(table.take("key-0", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 1000, 1), 14, "a held share is still there");
  t.equal(table.take("late", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 2000, 1), NO_SHARE, "full, windows current: refused");
  const after = keepUntil(T0) + 1;
  t.equal(table.take("late", T0 + 2 * W, keepUntil(T0 + 2 * W), 2048, 16, 1, true, after, 1), 15, "once their windows ended, the sweep makes room");
  t.equal(table.size, 1);
});

t.test("grants top up the window they were given for, and go back when unused", async (t) => {
  const table = new ShareTable(1 << 20);
  table.take("k", T0, keepUntil(T0), 2048, 16, 10, true, T0, 1);
  t.notOk(table.grant("k", T0 - W, 16, T0, 1), "a grant for another window is lost with it");
  t.ok(table.grant("k", T0, 16, T0 + 5, 1));
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 2, true, T0 + 10, 1), 20);
  const given: [string, number][] = [];
  table.returnIdle(T0 + 500, 1000, (key, _s, n) => given.push([key, n]));
  t.same(given, [], "not idle yet");
  table.returnIdle(T0 + 1010, 1000, (key, _s, n) => given.push([key, n]));
  t.same(given, [["k", 16]], "the grant goes back, the rest of the share stays");
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 4, true, T0 + 1100, 1), 0);
  t.ok(table.grant("k", T0, 0, T0 + 1200, 1) === false && table.entry("k")!.refused, "a refusal is remembered for the window");
  table.take("k", T0 + W, keepUntil(T0 + W), 2048, 16, 1, true, T0 + W, 1);
  t.notOk(table.entry("k")!.refused, "and forgotten in the next");
});

t.test("a reset of the identifier drops what is left of its grants, not the share by rule", async (t) => {
  const table = new ShareTable(1 << 20);
  table.take("0600:4:testuser", T0, keepUntil(T0), 2048, 16, 10, true, T0, 1);
  table.take("0600:4:testother", T0, keepUntil(T0), 2048, 16, 10, true, T0, 1);
  table.grant("0600:4:testuser", T0, 16, T0, 1);
  table.grant("0600:4:testother", T0, 16, T0, 1);
  table.forgetGrants("4:testuser");
  t.equal(table.entry("0600:4:testuser")!.left, 6, "16 granted dropped, the 6 of the share by rule kept");
  t.equal(table.entry("0600:4:testother")!.left, 22, "another identifier keeps its grant");
});

t.test("a share that opened empty asks for an opening grant once per window, and keeps it when idle", async (t) => {
  const table = new ShareTable(1 << 20);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0, 1), 15);
  t.notOk(table.wantsOpening("k", 2048), "a share by rule asks for none");
  t.equal(table.take("e", T0, keepUntil(T0), 2048, 16, 1, false, T0, 1), NO_SHARE, "opened empty");
  t.notOk(table.wantsOpening("e", 4096), "not for another limit than the share's");
  t.ok(table.wantsOpening("e", 2048), "its first forward asks");
  t.notOk(table.wantsOpening("e", 2048), "once a window");
  t.ok(table.grant("e", T0, 16, T0 + 1, 1, true));
  t.equal(table.take("e", T0, keepUntil(T0), 2048, 16, 1, false, T0 + 2, 1), 15, "the grant answers");
  const given: string[] = [];
  table.returnIdle(T0 + 10_000, 1000, (key) => given.push(key));
  t.same(given, [], "kept to the window's end like a share by rule, not returned when idle");
  t.equal(table.take("e", T0 + W, keepUntil(T0 + W), 2048, 16, 1, false, T0 + W, 1), NO_SHARE, "the next window opens empty again");
  t.ok(table.wantsOpening("e", 2048), "and asks again");
  t.equal(table.take("u", T0, keepUntil(T0), 2048, 16, 1, false, T0, 1), NO_SHARE);
  table.entry("u")!.asking = true;
  t.notOk(table.wantsOpening("u", 2048), "not while a LEASE is on its way");
});

t.test("a reset drops what is left of an opening grant too", async (t) => {
  const table = new ShareTable(1 << 20);
  table.take("0600:4:testuser", T0, keepUntil(T0), 2048, 16, 1, false, T0, 1);
  t.ok(table.wantsOpening("0600:4:testuser", 2048));
  table.grant("0600:4:testuser", T0, 16, T0, 1, true);
  t.equal(table.take("0600:4:testuser", T0, keepUntil(T0), 2048, 16, 3, false, T0 + 1, 1), 13);
  table.forgetGrants("4:testuser");
  t.equal(table.entry("0600:4:testuser")!.left, 0, "the owner's reset erased the grant: nothing left here");
});

t.test("kept grants are indexed by ring key: a reset finds them, the idle sweep never walks them, and the index goes with their window", async (t) => {
  const keys = Array.from({ length: 1000 }, (_, i) => `0600:5:user${i}`);
  const fill = (table: ShareTable) => {
    for (const k of keys) {
      table.take(k, T0, keepUntil(T0), 2048, 16, 1, false, T0, 1);
      table.wantsOpening(k, 2048);
      table.grant(k, T0, 16, T0, 1, true);
    }
    return table;
  };
  const shares = new ShareTable(1 << 20);
  for (const k of keys) shares.take(k, T0, keepUntil(T0), 2048, 16, 1, false, T0, 1);
  // Sized to hold the 1,000 kept grants with their index: full, so the next new key sweeps.
  const table = fill(new ShareTable(fill(new ShareTable(1 << 20)).bytes));
  t.ok(table.bytes > shares.bytes, `the index is counted in the table's bytes (${table.bytes} against ${shares.bytes} without it)`);
  let visited = 0;
  table.returnIdle(T0 + 10_000, 1000, () => visited++);
  t.equal(visited, 0, "nothing returned");
  table.forgetGrants("5:user7");
  t.equal(table.entry("0600:5:user7")!.left, 0, "the reset dropped user7's kept grant");
  t.equal(table.entry("0600:5:user8")!.left, 16, "and no other");
  // the windows end; a new key finds the table full and sweeps: shares and index entries go
  const after = keepUntil(T0) + 1;
  t.equal(table.take("0600:5:late", T0 + 2 * W, keepUntil(T0 + 2 * W), 2048, 16, 1, true, after, 1), 15);
  const one = new ShareTable(1 << 20);
  one.take("0600:5:late", T0 + 2 * W, keepUntil(T0 + 2 * W), 2048, 16, 1, true, after, 1);
  t.equal(table.size, 1, "every ended window swept");
  t.equal(table.bytes, one.bytes, "with its index entries: the bytes are those of one share");
});

t.test("a key in debt on its owner (DEBT_NOTICE): nothing of its window is answered here, a late grant included; the next window opens as usual", async (t) => {
  const table = new ShareTable(1 << 20);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 3, true, T0, 1), 13, "answering from the share by rule");
  t.ok(table.grant("k", T0, 16, T0 + 1, 1), "and a grant");
  table.indebted("k", T0, keepUntil(T0), T0 + 2);
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 3, 1), NO_SHARE, "in debt: the owner decides");
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 0, true, T0 + 3, 1), NO_SHARE, "a peek too");
  t.notOk(table.grant("k", T0, 16, T0 + 4, 1), "a grant asked before the debt and arriving after the notice is not taken");
  t.notOk(table.wantsOpening("k", 2048), "no opening grant is asked");
  t.equal(table.entry("k")!.spent, 3, "what the share by rule answered stays counted (foldOwned)");
  t.equal(table.take("k", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 5, 2), NO_SHARE, "a new connection to the owner does not lift it");
  t.equal(table.take("k", T0 + W, keepUntil(T0 + W), 2048, 16, 1, true, T0 + W, 2), 15, "the next window: the debt ended with its window");

  table.indebted("fresh", T0, keepUntil(T0), T0);
  t.equal(table.take("fresh", T0, keepUntil(T0), 2048, 16, 1, true, T0 + 1, 1), NO_SHARE, "a key not yet asked here: its share is not taken in that window");
  table.indebted("k", T0, keepUntil(T0), T0 + W + 1);
  t.equal(table.take("k", T0 + W, keepUntil(T0 + W), 2048, 16, 1, true, T0 + W + 2, 2), 14, "a notice of a window that ended changes nothing in a later one");
});
