/**
 * RerunningPass (src/shard/cluster/movement/rerunning-pass.ts): one pass at a time; requests made
 * while it runs fold into one more run when it ends, if `more()` allows; a throw is logged
 * and does not stop the next request from running it.
 */
import t from "tap";
import { pino } from "pino";
import { RerunningPass } from "../../../../src/shard/cluster/movement/rerunning-pass.js";

/** A pass that waits until released, counting its runs. */
function gatedPass() {
  const state = { runs: 0, running: 0, most: 0, release: () => {} };
  const pass = async () => {
    state.runs++;
    state.running++;
    state.most = Math.max(state.most, state.running);
    await new Promise<void>((r) => (state.release = r));
    state.running--;
  };
  return { state, pass };
}
const settle = () => new Promise<void>((r) => setImmediate(r));
const lines: string[] = [];
const logger = pino({ level: "info" }, { write: (s: string) => void lines.push(s) });

t.test("requests while running fold into one more run", async (t) => {
  const { state, pass } = gatedPass();
  const p = new RerunningPass("test pass", pass, () => true, logger);
  p.request();
  t.equal(state.runs, 1, "the first request starts a run");
  p.request();
  p.request();
  p.request();
  t.equal(state.runs, 1, "not while one runs");
  state.release();
  await settle();
  t.equal(state.runs, 2, "three requests meanwhile: one more run");
  state.release();
  await settle();
  t.equal(state.runs, 2, "nothing asked during the second run: no third");
  t.equal(state.most, 1, "never two at once");
  p.request();
  t.equal(state.runs, 3, "idle again: a request starts a run at once");
  state.release();
  await settle();
});

t.test("more() false: the run asked for meanwhile is skipped", async (t) => {
  const { state, pass } = gatedPass();
  let more = true;
  const p = new RerunningPass("test pass", pass, () => more, logger);
  p.request();
  p.request();
  more = false;
  state.release();
  await settle();
  t.equal(state.runs, 1, "stopped: no second run");
  more = true;
  p.request();
  t.equal(state.runs, 2, "the pass is idle, not stuck");
  state.release();
  await settle();
});

t.test("a pass that throws is logged once, and the next request runs it again", async (t) => {
  let runs = 0;
  const p = new RerunningPass(
    "failing pass",
    async () => {
      runs++;
      throw new Error("boom " + runs);
    },
    () => true,
    logger,
  );
  lines.length = 0;
  p.request();
  await settle();
  await settle();
  t.equal(runs, 1);
  t.equal(lines.length, 1, "one log line");
  t.match(JSON.parse(lines[0]!), { level: 50, err: "boom 1", msg: "failing pass failed" });
  p.request();
  await settle();
  t.equal(runs, 2, "run again on the next request");
});
