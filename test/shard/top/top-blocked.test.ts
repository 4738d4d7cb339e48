/**
 * The top offenders' summary (src/metrics/top-blocked.ts): Space-Saving's guarantees on a
 * skewed stream that overflows it (every heavy hitter kept, each count an overestimate by at
 * most its error, the error at most N/m), its bytes within the bound, the two intervals it
 * covers, and the namespace filter.
 */
import t from "tap";
import { TopBlocked } from "../../../src/shard/top/top-blocked.js";
import { prng } from "../../harness/prng.js";

const T0 = 1_800_000_000_000;
const ANY = () => true;

t.test("a stream that overflows the summary: heavy hitters kept, counts within their error", async (t) => {
  const bytes = 64 * 1024;
  const top = new TopBlocked(bytes, T0);
  const random = prng(7);
  const truth = new Map<string, number>();
  let n = 0;
  const block = (id: string) => {
    top.blocked("ns", id, T0);
    truth.set(id, (truth.get(id) ?? 0) + 1);
    n++;
  };
  // 20 heavy hitters among 20,000 identifiers seen once or twice, interleaved.
  for (let i = 0; i < 40_000; i++) {
    if (random() < 0.25) block(`heavy-${Math.floor(random() * 20)}`);
    else block(`light-${Math.floor(random() * 20_000)}`);
  }
  t.ok(top.bytes <= bytes, `${top.bytes} bytes within ${bytes}`);
  const all = top.top(100_000, ANY, T0);
  const monitored = all.length;
  t.ok(monitored < truth.size, `the summary overflowed: ${monitored} of ${truth.size} identifiers monitored`);
  for (const e of all) {
    const real = truth.get(e.identifier)!;
    if (!(e.count >= real && e.count - e.error <= real)) t.fail(`${e.identifier}: count ${e.count} error ${e.error}, true ${real}`);
    if (e.error > n / monitored) t.fail(`${e.identifier}: error ${e.error} above N/m = ${n / monitored}`);
  }
  const heavy = top
    .top(20, ANY, T0)
    .map((e) => e.identifier)
    .sort();
  t.same(heavy, Array.from({ length: 20 }, (_, i) => `heavy-${i}`).sort(), "the 20 heavy hitters are the top 20");
});

t.test("two rotating intervals: a block counts for one to two intervals, then is gone", async (t) => {
  const top = new TopBlocked(1024 * 1024, T0, 60_000);
  top.blocked("ns", "a", T0);
  top.blocked("ns", "a", T0 + 59_000);
  t.same(
    top.top(5, ANY, T0 + 59_000).map((e) => [e.identifier, e.count]),
    [["a", 2]],
  );
  top.blocked("ns", "b", T0 + 61_000);
  t.same(
    top.top(5, ANY, T0 + 61_000).map((e) => [e.identifier, e.count]),
    [
      ["a", 2],
      ["b", 1],
    ],
    "the previous interval still counts",
  );
  t.same(
    top.top(5, ANY, T0 + 122_000).map((e) => [e.identifier, e.count]),
    [["b", 1]],
    "two rotations later a is gone",
  );
  t.same(top.top(5, ANY, T0 + 400_000), [], "a long quiet: nothing");
});

t.test("the filter: only admitted namespaces, and keys never mix namespace and identifier", async (t) => {
  const top = new TopBlocked(1024 * 1024, T0);
  top.blocked("ab", "c", T0);
  top.blocked("a", "bc", T0);
  top.blocked("a", "bc", T0);
  top.blocked("checkout.web", "x", T0);
  t.same(
    top.top(10, ANY, T0).map((e) => [e.namespace, e.identifier, e.count]),
    [
      ["a", "bc", 2],
      ["ab", "c", 1],
      ["checkout.web", "x", 1],
    ],
  );
  t.same(
    top.top(10, (ns) => ns.startsWith("checkout."), T0).map((e) => e.identifier),
    ["x"],
  );
});
