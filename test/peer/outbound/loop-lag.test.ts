import t from "tap";
import { LoopLag, TICK_MS, TOLERANCE_MS } from "../../../src/peer/outbound/loop-lag.js";
import { sleep } from "../../harness/wait.js";

t.test("ticks on time add nothing; a late tick adds its lateness; a stall in progress counts", async (t) => {
  let now = 1000;
  const lag = new LoopLag(() => now);
  for (let i = 0; i < 10; i++) lag.tick((now += TICK_MS + TOLERANCE_MS));
  t.equal(lag.stalledMs(now), 0, "jitter within the tolerance is not a stall");
  lag.tick((now += TICK_MS + 500));
  t.equal(lag.stalledMs(now), 500);
  t.equal(lag.stalledMs(now + TICK_MS + 300), 800, "300 ms late and still not ticked: counted already");
  lag.tick((now += TICK_MS + 300));
  t.equal(lag.stalledMs(now), 800, "the same 300 ms, counted once");
  t.equal(lag.lagWithin(now, 100), 300, "the last stall");
  t.equal(lag.lagWithin(now, 1000), 500, "the worst within a second");
  t.equal(lag.lagWithin(now + 5000 + TICK_MS, 1000), 5000, "a stall in progress is the worst of all");
});

t.test("measures a real blocked event loop", async (t) => {
  const lag = new LoopLag().start();
  t.teardown(() => lag.stop());
  await sleep(60);
  const before = lag.stalledMs();
  const until = Date.now() + 300;
  while (Date.now() < until); // the loop is blocked for 300 ms
  await sleep(60);
  const stalled = lag.stalledMs() - before;
  t.ok(stalled >= 250 && stalled < 3000, `a 300 ms block measured as ${stalled.toFixed(0)} ms`);
});
