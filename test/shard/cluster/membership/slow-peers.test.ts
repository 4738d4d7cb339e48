import t from "tap";
import { HOLD_MIN_MS, SUSPECT_MIN_TIMEOUTS, SlowPeers } from "../../../../src/shard/cluster/membership/slow-peers.js";
import { hasQuorum } from "../../../../src/shard/cluster/membership/quorum.js";

const PEER_TIMEOUT_MS = 100;
const WINDOW_MS = 1000; // FAILURE_TIMEOUT_MS

/** One window of forwards to `member`, `timeouts` of `forwards` timed out, then the next forward closes it. */
function windowOf(slow: SlowPeers, member: string, start: number, forwards: number, timeouts: number): boolean {
  for (let i = 0; i < forwards; i++) slow.note(member, i < timeouts, start + i);
  return slow.note(member, false, start + WINDOW_MS);
}

t.test("suspected when a window of FAILURE_TIMEOUT_MS closes with enough timeouts, at least half of the forwards", async (t) => {
  const slow = new SlowPeers(PEER_TIMEOUT_MS, WINDOW_MS);
  slow.note("b", false, 0); // opens the first window
  t.notOk(windowOf(slow, "b", 1, 40, 8), "a timeout now and then is not slowness");
  t.notOk(windowOf(slow, "b", 1 + WINDOW_MS, SUSPECT_MIN_TIMEOUTS - 1, SUSPECT_MIN_TIMEOUTS - 1), "too few to judge");
  t.notOk(slow.isSuspected("b"));
  t.ok(windowOf(slow, "b", 1 + 2 * WINDOW_MS, 10, 6), "half timed out: suspected as the window closes");
  t.ok(slow.isSuspected("b"));
  t.notOk(windowOf(slow, "b", 1 + 3 * WINDOW_MS, 10, 10), "reported once");
  t.notOk(slow.isSuspected("c"));
  // A burst inside one window is not judged before the window ends.
  const fresh = new SlowPeers(PEER_TIMEOUT_MS, 5000);
  for (let i = 0; i < 4; i++) t.notOk(fresh.note("x", true, i * 100), "four timeouts within FAILURE_TIMEOUT_MS 5 s: not yet");
});

t.test("released only after the hold and once the heartbeat round trip is fast; the hold doubles on relapse", async (t) => {
  const slow = new SlowPeers(PEER_TIMEOUT_MS, WINDOW_MS);
  let now = 0;
  const suspect = () => {
    slow.note("b", true, now);
    for (let i = 1; i < SUSPECT_MIN_TIMEOUTS; i++) slow.note("b", true, now + i);
    t.ok(slow.note("b", true, now + WINDOW_MS + 5), "suspected");
    now += WINDOW_MS + 5;
  };
  slow.note("b", false, now);
  now += WINDOW_MS;
  suspect();
  t.equal(slow.holdMs("b"), HOLD_MIN_MS);
  slow.noteRtt("b", 1, now - 1);
  t.same(slow.release(now + HOLD_MIN_MS), [], "not on a round trip measured before the suspicion (a silent peer's last one)");
  slow.noteRtt("b", 1, now + 10);
  t.same(slow.release(now + HOLD_MIN_MS - 1), [], "not before the hold");
  slow.noteRtt("b", 150, now + 20);
  t.same(slow.release(now + HOLD_MIN_MS), [], "not while the link is slow (round trip over half the deadline)");
  now += HOLD_MIN_MS;
  slow.noteRtt("b", 2, now);
  t.same(slow.release(now), ["b"], "released when fast again");
  t.notOk(slow.isSuspected("b"));
  suspect();
  t.equal(slow.holdMs("b"), 2 * HOLD_MIN_MS, "a relapse soon after doubles the hold");
  now += 60_000;
  slow.noteRtt("b", 2, now);
  t.same(slow.release(now), ["b"]);
  now += 1;
  suspect();
  t.equal(slow.holdMs("b"), HOLD_MIN_MS, "forgiven after a long healthy spell");
});

t.test("quorum: a strict majority of the voting members", async (t) => {
  t.ok(hasQuorum(2, 3));
  t.notOk(hasQuorum(1, 3));
  t.ok(hasQuorum(3, 5));
  t.notOk(hasQuorum(2, 4), "half is not a majority");
  t.ok(hasQuorum(1, 1));
});
