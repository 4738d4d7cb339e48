import t from "tap";
import { DecideFlag, DecideItemFlag, type DecideQuery, type DecideResult, type PeerError } from "../../src/peer/index.js";
import { FrameType } from "../../src/peer/wire/constants.js";
import type { RelayedConnection } from "../harness/relay.js";
import { until } from "../harness/wait.js";
import { decideQuery, connectedPair, echoHandler, frameType, makeClient, PATIENT_TIMEOUT_MS, relayedPair } from "./helpers.js";

type Answer = { err: string | null; r: DecideResult | null };

/** decide() as a promise, copying the reused result object. */
function ask(client: ReturnType<typeof makeClient>, ns: string, id: string, alg: number, limit: number, dur: number): Promise<Answer> {
  return new Promise((resolve) =>
    client.decide(decideQuery(ns, id, alg, limit, dur), (err: PeerError | null, r: DecideResult | null) =>
      resolve({ err: err?.code ?? null, r: r && { ...r } }),
    ),
  );
}

async function pair(t: { teardown(fn: () => unknown): void }, handler = echoHandler()) {
  // connectedPair's patient deadline: at load 35 a 2 s deadline ran out before the 1 MiB batch
  // was encoded, and its budget-less items were never sent ("0 frames").
  const { client, server } = await connectedPair(t, handler);
  return { server, client, handler };
}

t.test("500 decide() calls in one turn travel in exactly one DECIDE frame", async (t) => {
  const { server, client, handler } = await pair(t);
  const answers: Array<Promise<Answer>> = [];
  for (let i = 0; i < 500; i++) answers.push(ask(client, i % 2 ? "api" : "api.pro", `user-${i}`, i % 4, 100 + i, 60));
  t.equal(client.pendingCount, 500);
  const got = await Promise.all(answers);
  t.equal(server.stats.decideFrames, 1, "one frame");
  t.equal(server.stats.decideItems, 500, "with 500 items");
  t.equal(handler.decided, 500);
  const wrong = got.filter((a, i) => a.err !== null || a.r!.code !== 0 || a.r!.remaining !== 100 + i - 1 || a.r!.resetTime !== 1_700_000_060);
  t.same(wrong, [], "every callback got its own answer");
  t.equal(client.pendingCount, 0);
});

t.test("separate turns make separate frames while answers come back", async (t) => {
  const { server, client } = await pair(t);
  const answers: Answer[] = [];
  for (let turn = 0; turn < 20; turn++) {
    const batch: Array<Promise<Answer>> = [];
    for (let i = 0; i < 10; i++) batch.push(ask(client, "ns", `t${turn}-${i}`, 0, turn * 10 + i + 1, 1));
    answers.push(...(await Promise.all(batch))); // nothing unanswered when the next turn asks
  }
  t.equal(server.stats.decideFrames, 20);
  t.same(
    answers.map((a) => a.r?.remaining),
    answers.map((_, i) => i),
  );
});

t.test("while two writes are unanswered, the next turns' forwards wait and leave with the first answer, in one frame", async (t) => {
  // The owner's answers are held in the relay (in order, so their tags still verify) until
  // released: which turns could see an answer is fixed by the test, not by timing.
  let holding = false;
  const held: Buffer[] = [];
  let toClient: RelayedConnection | undefined;
  const { server, client } = await relayedPair(t, echoHandler(), { timeoutMs: PATIENT_TIMEOUT_MS, heartbeatIntervalMs: 60_000 }, (frame, _n, dir, conn) => {
    if (dir !== "toClient") return [frame];
    toClient = conn;
    if (!holding) return [frame];
    held.push(frame);
    return [];
  });
  holding = true; // from "up" on: the handshake went through
  const answers: Array<Promise<Answer>> = [];
  for (let turn = 0; turn < 20; turn++) {
    for (let i = 0; i < 10; i++) answers.push(ask(client, "ns", `t${turn}-${i}`, 0, turn * 10 + i + 1, 1));
    await new Promise((r) => setImmediate(r));
  }
  await until("the first two turns' frames are decided", () => server.stats.decideItems === 20);
  await until("both answers are held", () => held.filter((f) => frameType(f) === FrameType.DECIDE_REPLY).length === 2);
  t.equal(server.stats.decideFrames, 2, "MAX_DECIDE_WRITES_IN_FLIGHT writes left; 18 turns wait");
  t.equal(client.pendingCount, 200, "every forward still waits (none dropped, none failed)");
  const readsBefore = server.stats.decideReads;
  holding = false;
  for (const f of held) toClient!.inject("toClient", f);
  const got = await Promise.all(answers);
  // One frame for the 18 turns that waited: one tag each way and one reply for all of them.
  t.equal(server.stats.decideFrames, 3, "the 18 waiting turns left in one frame");
  t.equal(server.stats.decideReads, readsBefore + 1, "in one write, read at once");
  t.equal(server.stats.decideItems, 200);
  t.same(
    got.map((a) => a.err ?? a.r?.remaining),
    got.map((_, i) => i),
    "each forward got its own answer",
  );
});

t.test("a frame of turns that waited carries the budget of the first of them, less the wait", async (t) => {
  // Answers held in the relay as above; the DECIDE frames' budgets read on their way to the owner.
  let holding = false;
  const held: Buffer[] = [];
  const budgets: number[] = [];
  let toClient: RelayedConnection | undefined;
  const { server, client } = await relayedPair(t, echoHandler(), { timeoutMs: PATIENT_TIMEOUT_MS, heartbeatIntervalMs: 60_000 }, (frame, _n, dir, conn) => {
    // DECIDE: u32 length, u8 type, u32 count, u32 budgetUs.
    if (dir === "toServer" && frameType(frame) === FrameType.DECIDE) budgets.push(frame.readUInt32BE(9));
    if (dir !== "toClient") return [frame];
    toClient = conn;
    if (!holding) return [frame];
    held.push(frame);
    return [];
  });
  holding = true;
  const answers: Array<Promise<Answer>> = [];
  const turn = async (name: string): Promise<void> => {
    for (let i = 0; i < 5; i++) answers.push(ask(client, "ns", `${name}-${i}`, 0, 100, 1));
    await new Promise((r) => setImmediate(r));
  };
  await turn("a");
  await turn("b");
  await until("both answers are held", () => held.filter((f) => frameType(f) === FrameType.DECIDE_REPLY).length === 2);
  await turn("c"); // the first turn that waits: its deadline is the frame's
  const cAsked = performance.now();
  await new Promise((r) => setTimeout(r, 400));
  await turn("d"); // 400 ms later: a budget of its own deadline would be ~400 ms more
  const released = performance.now();
  holding = false;
  for (const f of held) toClient!.inject("toClient", f);
  const got = await Promise.all(answers);
  t.equal(server.stats.decideFrames, 3, "turns c and d left in one frame");
  t.equal(got.filter((a) => a.r?.remaining !== 99).length, 0, "every forward answered");
  // c's deadline is at most cAsked + the timeout, and the frame left after `released`.
  const bound = (cAsked + PATIENT_TIMEOUT_MS - released) * 1000;
  t.ok(budgets[2]! <= bound, `the frame's budget ${budgets[2]} µs is within turn c's ${Math.round(bound)} µs`);
  t.ok(budgets[2]! > 0, "and still positive");
});

t.test("a batch over 1 MiB is split into frames and fully answered", async (t) => {
  const { server, client } = await pair(t);
  const answers: Array<Promise<Answer>> = [];
  const long = "k".repeat(1_000);
  for (let i = 0; i < 3_000; i++) answers.push(ask(client, "ns", `${i}:${long}`, 0, i + 1, 1));
  const got = await Promise.all(answers);
  t.ok(server.stats.decideFrames >= 3, `${server.stats.decideFrames} frames`);
  t.equal(server.stats.decideItems, 3_000);
  t.equal(got.filter((a, i) => a.r?.remaining !== i).length, 0);
});

t.test("errors are per item: a throwing handler fails only its own items", async (t) => {
  const handler = {
    decide({ identifier: id, limit }: DecideQuery, out: DecideResult): void {
      if (id.startsWith("bad")) throw new Error(`no ${id}`);
      if (id === "blocked") {
        out.code = 1;
        out.remaining = 0;
        out.resetTime = 1_700_000_100;
        out.retryAfterMs = 1234.5;
        return;
      }
      if (id === "weird-code") {
        out.code = 9; // out of range ⇒ reported as an error, not passed on
        return;
      }
      out.code = 0;
      out.remaining = limit - 1;
      out.resetTime = 1_700_000_000;
      out.retryAfterMs = 0;
    },
  };
  const { server, client } = await pair(t, handler as unknown as ReturnType<typeof echoHandler>);
  const ids = ["ok-1", "bad-1", "ok-2", "blocked", "bad-2", "weird-code", "ok-3"];
  const got = await Promise.all(ids.map((id) => ask(client, "ns", id, 2, 10, 60)));
  t.same(
    got.map((a) => [a.err, a.r?.code]),
    [
      [null, 0],
      [null, 2],
      [null, 0],
      [null, 1],
      [null, 2],
      [null, 2],
      [null, 0],
    ],
  );
  t.same(got[3]!.r, {
    code: 1,
    remaining: 0,
    resetTime: 1_700_000_100,
    retryAfterMs: 1234.5,
    flags: 0,
    limit: 0,
    duration: 0,
    algorithm: 0,
    granted: 0,
    grantWindowStart: 0,
  });
  t.same(got[1]!.r, { code: 2, remaining: 0, resetTime: 0, retryAfterMs: 0, flags: 0, limit: 0, duration: 0, algorithm: 0, granted: 0, grantWindowStart: 0 });
  t.equal(server.stats.decideFrames, 1);
  t.equal(server.stats.decideErrors, 2);
  t.equal(client.state, "up", "connection unaffected");
});

t.test("requests the wire cannot carry are refused synchronously, neighbours go out", async (t) => {
  const { server, client } = await pair(t);
  const sync: string[] = [];
  client.decide(decideQuery("ns", "x".repeat(70_000), 0, 10, 60), (err) => sync.push(err!.code));
  client.decide(decideQuery("ns", "id", 256, 10, 60), (err) => sync.push(err!.code)); // an algorithm code that is not a u8
  client.decide(decideQuery("ns", "id", 0, -1, 60), (err) => sync.push(err!.code));
  t.same(sync, ["invalid", "invalid", "invalid"], "answered inside decide()");
  const good = await ask(client, "ns", "fine", 0, 10, 60);
  t.equal(good.r?.remaining, 9);
  t.equal(server.stats.decideItems, 1);
});

t.test("a callback that throws does not hurt the batch or the connection", async (t) => {
  const { client } = await pair(t);
  const thrown: unknown[] = [];
  const onUncaught = (err: unknown): void => {
    thrown.push(err);
  };
  process.on("uncaughtException", onUncaught);
  t.teardown(() => {
    process.off("uncaughtException", onUncaught);
  });
  const others: Array<Promise<Answer>> = [];
  client.decide(decideQuery("ns", "first", 0, 10, 60), () => {
    throw new Error("caller bug");
  });
  for (let i = 0; i < 5; i++) others.push(ask(client, "ns", `n${i}`, 0, 10, 60));
  const got = await Promise.all(others);
  t.equal(got.filter((a) => a.r?.remaining === 9).length, 5);
  await new Promise((r) => setImmediate(r));
  t.equal(thrown.length, 1, "rethrown on its own tick");
  t.match(String(thrown[0]), /caller bug/);
  t.equal(client.state, "up");
});

t.test("an OPENING item reaches the owner's handler, and the grant it answers travels back with the decision", async (t) => {
  const seen: boolean[] = [];
  const handler = {
    decide({ identifier: id, limit, opening }: DecideQuery, out: DecideResult): void {
      seen.push(opening === true);
      out.code = 0;
      out.remaining = limit - 1;
      out.resetTime = 1_700_000_000;
      out.retryAfterMs = 0;
      if (opening === true && id !== "refused") {
        out.granted = 16;
        out.grantWindowStart = 1_699_999_980;
      }
    },
  };
  const { client } = await pair(t, handler as unknown as ReturnType<typeof echoHandler>);
  const askWith = (id: string, flags: number) =>
    new Promise<Answer>((resolve) =>
      client.decide(decideQuery("ns", id, 0, 2048, 60), (err, r) => resolve({ err: err?.code ?? null, r: r && { ...r } }), flags),
    );
  const [plain, opening, refused] = await Promise.all([
    askWith("plain", 0),
    askWith("opening", DecideItemFlag.OPENING),
    askWith("refused", DecideItemFlag.OPENING),
  ]);
  t.same(seen, [false, true, true], "the flag reaches the handler on its own item only");
  t.same([plain.r!.granted, plain.r!.flags], [0, 0], "no grant asked, none sent");
  t.same([opening.r!.granted, opening.r!.grantWindowStart, opening.r!.flags], [16, 1_699_999_980, DecideFlag.GRANTED], "the grant and its window");
  t.same([refused.r!.granted, refused.r!.flags], [0, 0], "asked and refused: nothing granted");
  t.same(
    [plain, opening, refused].map((a) => a.r!.remaining),
    [2047, 2047, 2047],
    "the decisions themselves unchanged",
  );
});
