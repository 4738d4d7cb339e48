/** The reconnect schedule: doubling from minMs, capped at maxMs, jittered into [base/2, base), restarted by reset(). */
import t from "tap";
import { ReconnectBackoff } from "../../../src/peer/outbound/reconnect-backoff.js";

t.test("doubles from minMs up to maxMs; the jitter spans [base/2, base)", async (t) => {
  const low = new ReconnectBackoff(50, 2_000, () => 0);
  t.same(
    Array.from({ length: 8 }, () => low.next()),
    [25, 50, 100, 200, 400, 800, 1_000, 1_000],
  );
  const high = new ReconnectBackoff(50, 2_000, () => 0.999);
  const delays = Array.from({ length: 8 }, () => high.next());
  const bases = [50, 100, 200, 400, 800, 1_600, 2_000, 2_000];
  delays.forEach((d, i) => t.ok(d < bases[i]! && d > bases[i]! * 0.99, `attempt ${i}: ${d} just under ${bases[i]}`));
});

t.test("reset() starts the series again", async (t) => {
  const b = new ReconnectBackoff(10, 1_000, () => 0);
  for (let i = 0; i < 10; i++) b.next();
  t.equal(b.next(), 500, "at the cap");
  b.reset();
  t.equal(b.next(), 5, "back to minMs / 2");
});

t.test("many losses neither overflow nor exceed the cap", async (t) => {
  const b = new ReconnectBackoff(50, 2_000, () => 0.5);
  let d = 0;
  for (let i = 0; i < 10_000; i++) d = b.next();
  t.equal(d, 1_500);
});
