import t from "tap";
import { CEILING_FACTOR, FailureDetector, MIN_SAMPLES, PAUSE_MARGIN, SAMPLES, SPREAD_FACTOR } from "../../../src/peer/outbound/failure-detector.js";

const FLOOR = 1000; // FAILURE_TIMEOUT_MS
const BEAT = 200; // HEARTBEAT_INTERVAL_MS

t.test("a calm link is judged at FAILURE_TIMEOUT_MS, exactly as configured", async (t) => {
  const d = new FailureDetector(FLOOR);
  d.reset(0, 0);
  t.equal(d.timeoutMs(), FLOOR, "no samples yet: the floor");
  let now = 0;
  for (let i = 0; i < SAMPLES; i++) d.beat((now += BEAT), 0);
  t.equal(d.timeoutMs(), FLOOR, "gaps of 200 ms, no spread: the floor");
  t.equal(d.remainingMs(now + 999, 0), 1, "1 ms left after 999 ms of silence");
  t.ok(d.remainingMs(now + 1000, 0) <= 0, "suspected after 1000 ms of silence");
});

t.test("a jittery peer gets mean + k·stddev of its gaps, capped at the ceiling", async (t) => {
  const d = new FailureDetector(FLOOR);
  d.reset(0, 0);
  let now = 0;
  // Gaps alternate 100 and 700 ms: mean 400, stddev 300, bound 400 + 4 × 300 = 1600.
  for (let i = 0; i < SAMPLES + 1; i++) d.beat((now += i % 2 === 0 ? 100 : 700), 0);
  t.equal(d.timeoutMs(), 400 + SPREAD_FACTOR * 300);
  t.ok(d.remainingMs(now + 1500, 0) > 0, "1.5 s of silence: not yet suspected");
  t.ok(d.remainingMs(now + 1600, 0) <= 0, "1.6 s: suspected");
  const wild = new FailureDetector(FLOOR);
  wild.reset(0, 0);
  now = 0;
  for (let i = 0; i < SAMPLES + 1; i++) wild.beat((now += i % 2 === 0 ? 10 : 3000), 0);
  t.equal(wild.timeoutMs(), CEILING_FACTOR * FLOOR, "never beyond the ceiling: a hung peer still leaves");
  const few = new FailureDetector(FLOOR);
  few.reset(0, 0);
  now = 0;
  for (let i = 0; i < MIN_SAMPLES; i++) few.beat((now += i % 2 === 0 ? 10 : 3000), 0);
  t.equal(few.timeoutMs(), FLOOR, "fewer than MIN_SAMPLES gaps: the floor alone");
});

t.test("a peer that paused and came back is given its longest pause with a margin", async (t) => {
  const d = new FailureDetector(250, 1000); // FAILURE_TIMEOUT_MS 250, HEARTBEAT_INTERVAL_MS 50
  d.reset(0, 0);
  let now = 0;
  for (let i = 0; i < 20; i++) d.beat((now += 50), 0);
  d.beat((now += 220), 0); // a starved loop: one gap of 220 ms
  for (let i = 0; i < 10; i++) d.beat((now += 50), 0);
  t.equal(d.timeoutMs(), PAUSE_MARGIN * 220, "330 ms: mean + 4 stddev alone would stay under the floor");
  t.ok(d.remainingMs(now + 300, 0) > 0, "the same pause again is not taken for death");
  for (let i = 0; i < SAMPLES; i++) d.beat((now += 50), 0);
  t.equal(d.timeoutMs(), 250, "once the pause leaves the window, back to the floor");
});

t.test("this node's own stall is not charged to the peer", async (t) => {
  const d = new FailureDetector(FLOOR);
  let now = 0;
  d.reset(now, 0);
  for (let i = 0; i < SAMPLES; i++) d.beat((now += BEAT), 0);
  // The peer's last frame at `now`; then this node's loop stalls 1500 ms (its stall counter
  // goes from 0 to 1500) and its silence timer fires at now + 1600.
  t.equal(d.silenceMs(now + 1600, 1500), 100, "100 ms of the 1600 are the peer's");
  t.ok(d.remainingMs(now + 1600, 1500) > 0, "not suspected for the node's own lag");
  t.ok(d.remainingMs(now + 1600, 0) <= 0, "the same silence without a stall: suspected");
  t.ok(d.remainingMs(now + 2500, 1500) <= 0, "a peer silent 1000 ms beyond the stall is suspected");
  // Gaps measured across a stall are net of it: the spread stays that of the peer.
  let at = now;
  let stall = 0;
  for (let i = 0; i < SAMPLES; i++) {
    stall += 800;
    d.beat((at += BEAT + 800), stall);
  }
  t.equal(d.timeoutMs(), FLOOR, "beats 1000 ms apart, 800 of them this node's stall: gaps of 200, the floor");
});
