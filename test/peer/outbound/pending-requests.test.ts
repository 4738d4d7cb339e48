import t from "tap";
import { TIMEOUT_ERROR, UNAVAILABLE_ERROR } from "../../../src/peer/errors.js";
import { PendingRequests, type DecideCallback } from "../../../src/peer/outbound/pending-requests.js";

const log: string[] = [];
const cb =
  (name: string): DecideCallback =>
  (err) =>
    log.push(`${name}:${err === null ? "ok" : err.code}`);

t.beforeEach(() => {
  log.length = 0;
});

t.test("ids are consecutive, lookups by id, unknown and repeated ids ignored", async (t) => {
  const p = new PendingRequests(16);
  const a = p.add(cb("a"), 10);
  const b = p.add(cb("b"), 10);
  t.same([a, b], [0, 1]);
  t.type(p.take(b), "function");
  t.equal(p.take(b), null, "answered once");
  t.equal(p.take(99), null, "never issued");
  t.equal(p.waiting, 1);
  t.equal(p.headDeadline, 10);
  p.take(a);
  t.equal(p.waiting, 0);
  t.equal(p.headDeadline, Infinity);
});

t.test("expire answers by deadline order and reports the next deadline", async (t) => {
  const p = new PendingRequests(16);
  p.add(cb("a"), 10);
  p.add(cb("b"), 10);
  p.add(cb("c"), 20);
  p.take(1);
  t.equal(p.expire(15, TIMEOUT_ERROR), 20);
  t.same(log, ["a:timeout"]);
  t.equal(p.expire(25, TIMEOUT_ERROR), Infinity);
  t.same(log, ["a:timeout", "c:timeout"]);
  t.equal(p.waiting, 0);
});

t.test("grows past its capacity, keeping every waiter", async (t) => {
  const p = new PendingRequests(16);
  for (let i = 0; i < 100; i++) p.add(cb(`w${i}`), i);
  t.equal(p.waiting, 100);
  for (let i = 99; i >= 50; i--) t.not(p.take(i), null);
  p.failAll(UNAVAILABLE_ERROR);
  t.equal(log.length, 50);
  t.same(log[0], "w0:unavailable");
  t.equal(p.waiting, 0);
});

t.test("request ids wrap around u32", async (t) => {
  const p = new PendingRequests(16, 0xfffffffe);
  const ids = [p.add(cb("a"), 1), p.add(cb("b"), 2), p.add(cb("c"), 3), p.add(cb("d"), 4)];
  t.same(ids, [0xfffffffe, 0xffffffff, 0, 1]);
  for (let i = 0; i < 40; i++) p.add(cb(`g${i}`), 5); // grow across the wrap
  t.not(p.take(0), null);
  t.not(p.take(0xffffffff), null);
  t.equal(p.take(0xfffffffd), null, "before the window");
  t.equal(p.expire(3.5, TIMEOUT_ERROR), 4);
  t.same(log, ["a:timeout"]);
  t.equal(p.waiting, 41);
});

t.test("callbacks may add waiters while being answered", async (t) => {
  const p = new PendingRequests(16);
  p.add((err) => {
    log.push(`first:${err!.code}`);
    p.add(cb("added"), 100);
  }, 1);
  t.equal(p.expire(5, TIMEOUT_ERROR), 100);
  p.add((err) => {
    log.push(`second:${err!.code}`);
    p.add(cb("added-on-fail"), 200);
  }, 101);
  p.failAll(UNAVAILABLE_ERROR);
  t.same(log, ["first:timeout", "added:unavailable", "second:unavailable"]);
  t.equal(p.waiting, 1, "the waiter added by a failing callback stays");
});
