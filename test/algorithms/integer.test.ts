import t from "tap";
import { ceilDiv, floorDiv } from "../../src/algorithms/integer.js";

t.test("floorDiv and ceilDiv are exact where x / y rounds the wrong way", async (t) => {
  const y = 31_536_000_000; // one year in ms
  // k·y stays below 2^53: the documented exact range (limit × duration_ms ≤ 2^53).
  for (const k of [1, 7, 100_003, 285_000]) {
    const x = k * y - 1;
    t.equal(floorDiv(x, y), k - 1, `floor((${k}·y − 1)/y)`);
    t.equal(ceilDiv(x + 2, y), k + 1);
    t.equal(floorDiv(k * y, y), k);
  }
  t.equal(floorDiv(-7, 2), -4);
  t.equal(ceilDiv(7, 2), 4);
  t.equal(ceilDiv(-7, 2), -3);
});
