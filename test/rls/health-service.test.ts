/**
 * HealthService's Watch fan-out: a readiness change reaches every watcher, a bounded number
 * per event-loop turn, so a node with many watchers never holds its loop for all of them;
 * watchers past MAX_WATCHES are refused.
 */
import t from "tap";
import { HealthService, MAX_WATCHES, NOT_SERVING, SERVING } from "../../src/rls/health-service.js";

const turn = () => new Promise((resolve) => setImmediate(resolve));

t.test("a change is told to every watcher, spread over event-loop turns", async (t) => {
  let ready = true;
  const health = new HealthService(() => ready);
  t.teardown(() => health.close());
  const told: number[] = [];
  let accepted = 0;
  for (let i = 0; i < MAX_WATCHES; i++) {
    const unwatch = health.watch(
      (s) => (s === NOT_SERVING ? told.push(i) : undefined),
      () => {},
    );
    if (unwatch !== undefined) accepted++;
  }
  t.equal(accepted, MAX_WATCHES);
  t.equal(
    health.watch(
      () => {},
      () => {},
    ),
    undefined,
    "one past MAX_WATCHES is refused",
  );
  ready = false;
  health.poll();
  t.ok(told.length > 0 && told.length < MAX_WATCHES, `${told.length} told in the turn of the change`);
  let turns = 1;
  while (told.length < MAX_WATCHES && turns < 1000) {
    await turn();
    turns++;
  }
  t.equal(told.length, MAX_WATCHES, `every watcher told once, over ${turns} turns`);
  t.equal(new Set(told).size, MAX_WATCHES);
  health.poll();
  await turn();
  t.equal(told.length, MAX_WATCHES, "an unchanged status tells nobody again");
  t.equal(health.status(""), NOT_SERVING);
  ready = true;
  t.equal(health.status("envoy.service.ratelimit.v3.RateLimitService"), SERVING);
  t.equal(health.status("other"), undefined);
});
