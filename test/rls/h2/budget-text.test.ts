/** The flood budget (a token bucket on a passed-in clock) and grpc-timeout's parsing. */
import t from "tap";
import { FrameBudget } from "../../../src/rls/h2/budget.js";
import { echo, grpcTimeoutMs } from "../../../src/rls/h2/grpc-text.js";

t.test("FrameBudget: a burst, then the refill rate, never more than the burst", async (t) => {
  const b = new FrameBudget(10, 100, 0);
  for (let i = 0; i < 10; i++) t.ok(b.spend(0));
  t.notOk(b.spend(0), "the burst is spent");
  t.notOk(b.spend(5), "5 ms refill half a token");
  t.ok(b.spend(10), "10 ms refill one");
  t.notOk(b.spend(10));
  let spent = 0;
  while (b.spend(1_000_000)) spent++;
  t.equal(spent, 10, "a long quiet refills the burst, not more");
});

t.test("grpc-timeout: value and unit, at least 1 ms; malformed is undefined", async (t) => {
  t.equal(grpcTimeoutMs("100m"), 100);
  t.equal(grpcTimeoutMs("2S"), 2000);
  t.equal(grpcTimeoutMs("1M"), 60_000);
  t.equal(grpcTimeoutMs("1H"), 3_600_000);
  t.equal(grpcTimeoutMs("1500u"), 2);
  t.equal(grpcTimeoutMs("5n"), 1);
  for (const bad of ["", "100", "m", "123456789m", "1.5S", "-1S", "10x"]) t.equal(grpcTimeoutMs(bad), undefined, JSON.stringify(bad));
});

t.test("echo: caller input cut to a few dozen characters", async (t) => {
  t.equal(echo("/short"), "/short");
  t.equal(echo("x".repeat(1000)).length, 49);
});
