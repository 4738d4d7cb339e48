import t from "tap";
import { createSecretKey, randomBytes } from "node:crypto";
import {
  BATCH_COUNT_BYTES,
  DECIDE_BUDGET_BYTES,
  DECIDE_ITEM_FIXED_BYTES,
  DECIDE_REPLY_APPLIED_BYTES,
  DECIDE_REPLY_GRANTED_BYTES,
  DECIDE_REPLY_ITEM_BYTES,
  DecideCode,
  DecideFlag,
  DecideItemFlag,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_DECIDE_ITEMS,
  MAX_FRAME_BYTES,
  NO_BUDGET,
  PROTOCOL_MIN,
  PROTOCOL_VERSION,
  TAG_BYTES,
} from "../../../src/peer/wire/constants.js";
import { FrameError } from "../../../src/peer/errors.js";
import { FrameDecoder } from "../../../src/peer/wire/frame.js";
import { FrameOpener, FrameSealer } from "../../../src/peer/link/session.js";
import {
  DecideBatchReader,
  DecideBatchWriter,
  DecideReplyWriter,
  decodeCall,
  decodeCallReply,
  decodeChallenge,
  decodeDecideItems,
  decodeHello,
  decodePing,
  decodePong,
  decodeProof,
  encodeCall,
  encodeCallReply,
  encodeChallenge,
  encodeHello,
  encodePing,
  encodePong,
  encodeProof,
  readDecideReply,
  type DecideItem,
} from "../../../src/peer/wire/messages.js";

/** Where a DECIDE body's first item starts: after its count and its budget. */
const ITEMS_AT = BATCH_COUNT_BYTES + DECIDE_BUDGET_BYTES;

/** Seal sealed frames with a fresh key and split them back into [type, body] with the real, tag-checking decoder. */
function frames(bytes: Buffer): Array<{ type: number; body: Buffer }> {
  const key = createSecretKey(randomBytes(32));
  const out: Array<{ type: number; body: Buffer }> = [];
  const dec = new FrameDecoder((type, body) => out.push({ type, body: Buffer.from(body) }), MAX_FRAME_BYTES);
  dec.opener = new FrameOpener(key);
  dec.push(new FrameSealer(key).seal(Buffer.from(bytes)));
  return out;
}
/** The body of a handshake frame (those carry no tag). */
const body = (frame: Buffer): Buffer => frame.subarray(FRAME_HEADER_BYTES);

t.test("handshake messages round trip", async (t) => {
  const n1 = Buffer.alloc(32, 1);
  const n2 = Buffer.alloc(32, 2);
  const mac = Buffer.alloc(32, 3);
  t.same(decodeHello(body(encodeHello(n1, "node-ä:7001", "srv:7002"))), {
    version: PROTOCOL_MIN,
    nonce: n1,
    clientNodeId: "node-ä:7001",
    serverNodeId: "srv:7002",
  });
  t.same(decodeChallenge(body(encodeChallenge(n2, mac))), { nonce: n2, proof: mac });
  t.same(decodeProof(body(encodeProof(mac))), mac);
  const ping = encodePing(FrameType.PING, 1234.5678);
  t.equal(ping.length, FRAME_HEADER_BYTES + 8 + TAG_BYTES, "sealed frames carry room for their tag");
  t.equal(decodePing(frames(ping)[0]!.body), 1234.5678);
  const pong = { echoMs: 0, wallMs: 0, tag: "" };
  decodePong(frames(encodePong(1234.5678, 1_795_000_000_123))[0]!.body, pong);
  t.same(pong, { echoMs: 1234.5678, wallMs: 1_795_000_000_123, tag: "" }, "PONG echoes the PING and carries the server's wall clock");
  decodePong(frames(encodePong(1, 2, "3f9a0c12e4b7"))[0]!.body, pong);
  t.same(pong, { echoMs: 1, wallMs: 2, tag: "3f9a0c12e4b7" }, "and the server's tag (its policy version)");
  decodePong(frames(encodePong(1, 2, "not ascii é"))[0]!.body, pong);
  t.equal(pong.tag, "", "a tag that is not printable ASCII is not sent");
  decodePong(frames(encodePing(FrameType.PONG, 42))[0]!.body, pong);
  t.same(pong, { echoMs: 42, wallMs: NaN, tag: "" }, "an 8-byte PONG (an older peer) has no wall clock");
  t.throws(() => decodePong(Buffer.alloc(12), pong), FrameError);
  const badLength = Buffer.alloc(20);
  badLength[16] = 5;
  t.throws(() => decodePong(badLength, pong), FrameError, "a tag length that does not fill the body");
  const control = Buffer.alloc(18);
  control[16] = 1;
  control[17] = 0x0a;
  t.throws(() => decodePong(control, pong), FrameError, "a tag with a control character");
});

t.test("handshake messages reject bad bodies", async (t) => {
  const hello = body(encodeHello(Buffer.alloc(32), "abc", "def"));
  t.equal(hello[0], PROTOCOL_MIN, "HELLO starts with the lowest protocol version the sender speaks (what a node of 11 accepts)");
  t.throws(() => decodeHello(hello.subarray(0, hello.length - 1)), FrameError, "truncated");
  t.throws(() => decodeHello(Buffer.concat([hello, Buffer.from([0])])), FrameError, "trailing byte");
  t.throws(() => decodeHello(hello.subarray(0, 20)), FrameError, "short nonce");
  // The version is read, not judged, here: ServerHandshake refuses one older than PROTOCOL_MIN.
  const v13 = Buffer.from(hello);
  v13[0] = 13;
  t.equal(decodeHello(v13).version, 13, "another protocol version is read as it is");
  const badUtf8 = Buffer.concat([Buffer.from([PROTOCOL_VERSION]), Buffer.alloc(32), Buffer.from([0, 2, 0xc3, 0x28, 0, 1, 0x41])]);
  t.throws(() => decodeHello(badUtf8), FrameError, "node id not UTF-8");
  t.throws(() => decodeHello(Buffer.concat([Buffer.from([PROTOCOL_VERSION]), Buffer.alloc(32), Buffer.from([0, 0, 0, 1, 0x41])])), FrameError, "empty node id");
  t.throws(() => decodeHello(Buffer.concat([Buffer.from([PROTOCOL_VERSION]), Buffer.alloc(32), Buffer.from([0, 1, 0x41])])), FrameError, "no server id");
  t.throws(() => decodeProof(Buffer.alloc(31)), FrameError);
  t.throws(() => decodeChallenge(Buffer.alloc(63)), FrameError);
  t.throws(() => decodeChallenge(Buffer.alloc(65)), FrameError);
  t.throws(() => decodePing(Buffer.alloc(7)), FrameError);
  t.throws(() => encodeHello(Buffer.alloc(32), "", "x"), FrameError);
  t.throws(() => encodeHello(Buffer.alloc(32), "x", "a\ud800"), FrameError, "a node id must be well-formed Unicode");
});

const items: DecideItem[] = [
  { reqId: 0, algorithm: 0, limit: 10, duration: 60, cost: 1, flags: 0, ns: "api", identifier: "user-1" },
  { reqId: 1, algorithm: 1, limit: 0, duration: 1, cost: 0, flags: 0, ns: "api", identifier: "" },
  { reqId: 2, algorithm: 2, limit: 0xffffffff, duration: 0xffffffff, cost: 0xffffffff, flags: 0, ns: "api.pro", identifier: "ünïcødé-日本語-🚀" },
  { reqId: 0xfffffffe, algorithm: 3, limit: 5, duration: 3600, cost: 5, flags: 0, ns: "ns-€", identifier: "x".repeat(512) },
  { reqId: 0xffffffff, algorithm: 3, limit: 5, duration: 3600, cost: 1, flags: 0, ns: "ns-€", identifier: "语".repeat(512) },
  { reqId: 7, algorithm: 0, limit: 1, duration: 2, cost: 1, flags: 0, ns: "", identifier: "empty-ns" },
  { reqId: 8, algorithm: 0, limit: 1, duration: 2, cost: 1, flags: 1, ns: "ns", identifier: "overridable" },
];

function writeAll(w: DecideBatchWriter, list: DecideItem[]): void {
  for (const it of list) {
    if (!w.add(it.reqId, it.algorithm, it.limit, it.duration, it.ns, it.identifier, it.cost, it.flags)) throw new Error(`refused ${it.reqId}`);
  }
}

t.test("DECIDE round trip, incl. non-ASCII and 512-char identifiers", async (t) => {
  const w = new DecideBatchWriter(64); // tiny start: exercises growth
  writeAll(w, items);
  t.equal(w.count, items.length);
  const out = frames(w.take()!);
  t.equal(out.length, 1);
  t.equal(out[0]!.type, FrameType.DECIDE);
  t.same(decodeDecideItems(out[0]!.body), items);
  t.equal(w.take(), null, "writer is reset after take");
  // Reused after take
  writeAll(w, items.slice(0, 2));
  t.same(decodeDecideItems(frames(w.take()!)[0]!.body), items.slice(0, 2));
});

t.test("DECIDE: a lone surrogate is sent as U+FFFD and accepted", async (t) => {
  const w = new DecideBatchWriter();
  t.ok(w.add(1, 0, 1, 1, "ns", "a\ud800b"));
  t.same(decodeDecideItems(frames(w.take()!)[0]!.body)[0]!.identifier, "a\ufffdb");
});

t.test("DECIDE writer refuses what the wire cannot carry, and stays usable", async (t) => {
  const w = new DecideBatchWriter();
  t.notOk(w.add(1, 256, 1, 1, "ns", "id"), "algorithm 256 (not a u8)");
  t.notOk(w.add(1, -1, 1, 1, "ns", "id"), "algorithm -1");
  t.notOk(w.add(1, 1.5, 1, 1, "ns", "id"), "algorithm 1.5");
  t.notOk(w.add(1, 0, -1, 1, "ns", "id"), "negative limit");
  t.notOk(w.add(1, 0, 2 ** 32, 1, "ns", "id"), "limit over u32");
  t.notOk(w.add(1, 0, 1, 1.5, "ns", "id"), "fractional duration");
  t.notOk(w.add(1, 0, 1, NaN, "ns", "id"), "NaN duration");
  t.notOk(w.add(1, 0, 1, 1, "ns", "x".repeat(65_536)), "identifier over 65535 bytes");
  t.notOk(w.add(1, 0, 1, 1, "é".repeat(40_000), "id"), "namespace over 65535 bytes (80000 UTF-8)");
  t.ok(w.add(1, 0, 1, 1, "ns", "x".repeat(65_535)), "exactly 65535 bytes fits");
  t.equal(w.count, 1);
  t.same(decodeDecideItems(frames(w.take()!)[0]!.body).length, 1);
});

t.test("DECIDE batches split at MAX_DECIDE_ITEMS items", async (t) => {
  const w = new DecideBatchWriter();
  const list: DecideItem[] = [];
  for (let i = 0; i < 2 * MAX_DECIDE_ITEMS + 3; i++)
    list.push({ reqId: i, algorithm: 0, limit: 1, duration: 60, cost: 1, flags: 0, ns: "ns", identifier: `k${i}` });
  writeAll(w, list);
  const out = frames(w.take()!);
  t.same(
    out.map((f) => decodeDecideItems(f.body).length),
    [MAX_DECIDE_ITEMS, MAX_DECIDE_ITEMS, 3],
  );
  t.same(
    out.flatMap((f) => decodeDecideItems(f.body)),
    list,
  );
  const tooMany = Buffer.alloc(ITEMS_AT + (MAX_DECIDE_ITEMS + 1) * DECIDE_ITEM_FIXED_BYTES);
  tooMany.writeUInt32BE(MAX_DECIDE_ITEMS + 1, 0);
  t.throws(() => decodeDecideItems(tooMany), /item count/, "a frame over the item cap is refused whole");
});

t.test("DECIDE batches over the frame limit split into several valid frames", async (t) => {
  const w = new DecideBatchWriter();
  const list: DecideItem[] = [];
  for (let i = 0; i < 1000; i++) {
    list.push({ reqId: i, algorithm: i % 4, limit: i, duration: 60, cost: 1, flags: 0, ns: "ns", identifier: `${i}-`.padEnd(5000, "z") });
  }
  writeAll(w, list);
  const out = frames(w.take()!);
  t.ok(out.length >= 3, `${out.length} frames`);
  for (const f of out) t.ok(f.body.length + 1 + TAG_BYTES <= MAX_FRAME_BYTES);
  t.same(
    out.flatMap((f) => decodeDecideItems(f.body)),
    list,
  );
});

t.test("DECIDE frames carry the sender's deadline budget, every frame of a split batch the same", async (t) => {
  const w = new DecideBatchWriter();
  const list: DecideItem[] = [];
  for (let i = 0; i < MAX_DECIDE_ITEMS + 3; i++)
    list.push({ reqId: i, algorithm: 0, limit: 1, duration: 60, cost: 1, flags: 0, ns: "ns", identifier: `k${i}` });
  writeAll(w, list);
  const out = frames(w.take(87_654.9)!);
  t.equal(out.length, 2);
  const r = new DecideBatchReader();
  for (const f of out) {
    r.decode(f.body);
    t.equal(r.budgetUs, 87_654, "whole µs, in each frame");
  }
  writeAll(w, list.slice(0, 1));
  r.decode(frames(w.take()!)[0]!.body);
  t.equal(r.budgetUs, NO_BUDGET, "no budget given: the owner never drops it");
  writeAll(w, list.slice(0, 1));
  r.decode(frames(w.take(-3)!)[0]!.body);
  t.equal(r.budgetUs, NO_BUDGET, "a nonsense budget is none, not a wrapped u32");
  writeAll(w, list.slice(0, 1));
  r.decode(frames(w.take(0)!)[0]!.body);
  t.equal(r.budgetUs, 0, "an exhausted budget travels as 0");
});

t.test("a batch of several turns: each turn's items in a frame of their own, with the budget of that turn's deadline", async (t) => {
  const w = new DecideBatchWriter();
  const item = (i: number): DecideItem => ({ reqId: i, algorithm: 0, limit: 1, duration: 60, cost: 1, flags: 0, ns: "ns", identifier: `k${i}` });
  w.startFrame(1_000);
  writeAll(w, [item(0), item(1)]);
  w.startFrame(2_000);
  writeAll(w, [item(2)]);
  w.startFrame(3_000); // a turn that added nothing makes no frame
  w.startFrame(4_000);
  writeAll(w, [item(3), item(4), item(5)]);
  const out = frames(w.take((deadline) => deadline * 10)!);
  t.equal(w.framesTaken, 3);
  const r = new DecideBatchReader();
  const got = out.map((f) => {
    r.decode(f.body);
    return { budget: r.budgetUs, ids: Array.from(r.reqIds.subarray(0, r.count)) };
  });
  t.same(got, [
    { budget: 10_000, ids: [0, 1] },
    { budget: 20_000, ids: [2] },
    { budget: 40_000, ids: [3, 4, 5] },
  ]);
});

t.test("DECIDE decoder rejects every truncation, trailing bytes and bad fields", async (t) => {
  const w = new DecideBatchWriter();
  writeAll(w, items);
  const good = frames(w.take()!)[0]!.body;
  const accepted: number[] = [];
  for (let n = 0; n < good.length; n++) {
    try {
      decodeDecideItems(good.subarray(0, n));
      accepted.push(n);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
    }
  }
  t.same(accepted, [], `all ${good.length} truncations rejected`);
  t.throws(() => decodeDecideItems(Buffer.concat([good, Buffer.from([0])])), FrameError, "trailing byte");
  const zero = Buffer.from(good);
  zero.writeUInt32BE(0, 0);
  t.throws(() => decodeDecideItems(zero), FrameError, "zero items");
  const more = Buffer.from(good);
  more.writeUInt32BE(items.length + 1, 0);
  t.throws(() => decodeDecideItems(more), FrameError, "count larger than items");
  const fewer = Buffer.from(good);
  fewer.writeUInt32BE(items.length - 1, 0);
  t.throws(() => decodeDecideItems(fewer), FrameError, "count smaller than items");
  const huge = Buffer.from(good);
  huge.writeUInt32BE(0xffffffff, 0);
  t.throws(() => decodeDecideItems(huge), FrameError, "absurd count");
  // The code is carried, not judged: the receiving handler resolves it (an unknown one answers that item with an error).
  const alg = Buffer.from(good);
  alg[ITEMS_AT + 4] = 200;
  t.equal(decodeDecideItems(alg)[0]!.algorithm, 200, "any algorithm code is carried");
  const nsLen = Buffer.from(good);
  nsLen.writeUInt16BE(0xffff, ITEMS_AT + 13);
  t.throws(() => decodeDecideItems(nsLen), FrameError, "string length past the end");
});

t.test("DECIDE decoder rejects invalid UTF-8", async (t) => {
  const w = new DecideBatchWriter();
  t.ok(w.add(1, 0, 1, 1, "ns", "ab"));
  const b = frames(w.take()!)[0]!.body;
  b[b.length - 1] = 0xff;
  t.throws(() => decodeDecideItems(b), FrameError);
});

t.test("DECIDE decoder reuses a repeated namespace correctly", async (t) => {
  const w = new DecideBatchWriter();
  const list: DecideItem[] = [
    { reqId: 1, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "aa", identifier: "1" },
    { reqId: 2, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "aa", identifier: "2" },
    { reqId: 3, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "ab", identifier: "3" },
    { reqId: 4, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "ab", identifier: "4" },
    { reqId: 5, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "a".repeat(100), identifier: "5" },
    { reqId: 6, algorithm: 0, limit: 1, duration: 1, cost: 1, flags: 0, ns: "a".repeat(99) + "b", identifier: "6" },
  ];
  writeAll(w, list);
  t.same(decodeDecideItems(frames(w.take()!)[0]!.body), list);
});

t.test("DECIDE_REPLY round trip and count check", async (t) => {
  const rw = new DecideReplyWriter();
  rw.begin(6);
  rw.put(1, 0, 9, 1_700_000_060, 0);
  rw.put(0xffffffff, 1, 0, 1_700_000_061, 1234.567);
  rw.put(3, 2, -5, NaN, -1); // a careless handler's numbers are clamped
  rw.put(4, 0, 0, 1_700_000_062, 0, DecideFlag.APPLIED | DecideFlag.SHADOW, 0, 3600, 2); // an override applied, in shadow
  rw.put(5, 0, 991, 1_700_000_100, 0, 0, 0, 0, 0, 7812, 1_699_999_200); // an opening grant beside the decision
  rw.put(6, 0, 7, 1_700_000_100, 0, DecideFlag.APPLIED | DecideFlag.GRANTED, 10, 60, 0, 0, 0); // GRANTED asked with nothing granted: not set
  const f = frames(rw.finish());
  t.equal(f[0]!.type, FrameType.DECIDE_REPLY);
  t.equal(
    f[0]!.body.length,
    4 + 6 * DECIDE_REPLY_ITEM_BYTES + 2 * DECIDE_REPLY_APPLIED_BYTES + DECIDE_REPLY_GRANTED_BYTES,
    "the applied values only where an override applied, the grant only where one was given",
  );
  const got: number[][] = [];
  t.equal(
    readDecideReply(f[0]!.body, (...a) => got.push(a)),
    6,
  );
  t.same(got, [
    [1, 0, 9, 1_700_000_060, 0, 0, 0, 0, 0, 0, 0],
    [0xffffffff, 1, 0, 1_700_000_061, 1234.567, 0, 0, 0, 0, 0, 0],
    [3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    [4, 0, 0, 1_700_000_062, 0, 3, 0, 3600, 2, 0, 0],
    [5, 0, 991, 1_700_000_100, 0, DecideFlag.GRANTED, 0, 0, 0, 7812, 1_699_999_200],
    [6, 0, 7, 1_700_000_100, 0, DecideFlag.APPLIED, 10, 60, 0, 0, 0],
  ]);
  const b = f[0]!.body;
  t.throws(() => readDecideReply(b.subarray(0, b.length - 1), () => {}), FrameError, "truncated");
  const wrongCount = Buffer.from(b);
  wrongCount.writeUInt32BE(3, 0);
  const seen: number[] = [];
  t.throws(() => readDecideReply(wrongCount, (id) => seen.push(id)), FrameError, "count mismatch");
  const badCode = Buffer.from(b);
  badCode[4 + DECIDE_REPLY_ITEM_BYTES + 4] = 3;
  t.throws(() => readDecideReply(badCode, (id) => seen.push(id)), FrameError, "unknown code");
  const badFlags = Buffer.from(b);
  badFlags[4 + 21] = 16;
  t.throws(() => readDecideReply(badFlags, (id) => seen.push(id)), FrameError, "unknown flags");
  const flagWithoutValues = Buffer.from(b.subarray(0, 4 + 3 * DECIDE_REPLY_ITEM_BYTES));
  flagWithoutValues.writeUInt32BE(3, 0);
  flagWithoutValues[4 + 21] = DecideFlag.APPLIED;
  t.throws(() => readDecideReply(flagWithoutValues, (id) => seen.push(id)), FrameError, "APPLIED without its values");
  const grantWithoutValues = Buffer.from(b.subarray(0, 4 + 3 * DECIDE_REPLY_ITEM_BYTES));
  grantWithoutValues.writeUInt32BE(3, 0);
  grantWithoutValues[4 + 21] = DecideFlag.GRANTED;
  t.throws(() => readDecideReply(grantWithoutValues, (id) => seen.push(id)), FrameError, "GRANTED without its values");
  t.same(seen, [], "nothing from a bad reply is delivered");
});

t.test("DECIDE: an item with unknown flags refuses the frame", async (t) => {
  const w = new DecideBatchWriter();
  w.add(1, 0, 1, 1, "ns", "id", 1, DecideItemFlag.OVERRIDABLE | DecideItemFlag.OPENING);
  const body = frames(w.take()!)[0]!.body;
  t.equal(body[8 + 21], DecideItemFlag.OVERRIDABLE | DecideItemFlag.OPENING, "both known flags travel");
  t.doesNotThrow(() => decodeDecideItems(body));
  body[8 + 21] = DecideItemFlag.CHARGE | DecideItemFlag.REFUND;
  t.doesNotThrow(() => decodeDecideItems(body), "a refund (protocol 12)");
  body[8 + 21] = 32;
  t.throws(() => decodeDecideItems(body), FrameError);
  body[8 + 21] = DecideItemFlag.REFUND;
  t.throws(() => decodeDecideItems(body), FrameError, "REFUND without CHARGE");
  body[8 + 21] = DecideItemFlag.CHARGE | DecideItemFlag.CHARGE_ID;
  t.throws(() => decodeDecideItems(body), FrameError, "CHARGE_ID without the id's bytes");
});

t.test("DECIDE: a charge id travels after the identifier (protocol 13), and is held to its bounds", async (t) => {
  const w = new DecideBatchWriter();
  const id = "!" + "x".repeat(62) + "~";
  t.ok(w.add(1, 0, 10, 60, "ns", "ïd", 5, DecideItemFlag.CHARGE, id));
  t.ok(w.add(2, 0, 10, 60, "ns", "id", 5, DecideItemFlag.CHARGE | DecideItemFlag.REFUND, "a"));
  t.ok(w.add(3, 0, 10, 60, "ns", "id", 5, DecideItemFlag.CHARGE));
  const items = decodeDecideItems(frames(w.take()!)[0]!.body);
  t.same(
    items.map((i) => [i.identifier, i.flags, i.chargeId]),
    [
      ["ïd", DecideItemFlag.CHARGE | DecideItemFlag.CHARGE_ID, id],
      ["id", DecideItemFlag.CHARGE | DecideItemFlag.REFUND | DecideItemFlag.CHARGE_ID, "a"],
      ["id", DecideItemFlag.CHARGE, undefined],
    ],
  );
  for (const bad of ["", "x".repeat(65), "a b", "é", "\n"])
    t.notOk(w.add(9, 0, 10, 60, "ns", "id", 5, DecideItemFlag.CHARGE, bad), `not encoded: ${JSON.stringify(bad)}`);
  t.notOk(w.add(9, 0, 10, 60, "ns", "id", 5, 0, "abc"), "an id only with a charge");
  t.equal(w.count, 0);

  // A length byte past the frame, or out of 1..64, refuses the whole frame.
  w.add(1, 0, 10, 60, "ns", "id", 5, DecideItemFlag.CHARGE, "abc");
  const body = frames(w.take()!)[0]!.body;
  const at = 8 + 22 + 4; // the id's length byte, after the fixed part, "ns" and "id"
  t.equal(body[at], 3);
  for (const len of [0, 4, 65, 255]) {
    const b = Buffer.from(body);
    b[at] = len;
    t.throws(() => decodeDecideItems(b), FrameError, `length ${len}`);
  }
});

t.test("DECIDE_REPLY: DUPLICATE travels (protocol 13)", async (t) => {
  const r = new DecideReplyWriter();
  r.begin(1);
  r.put(7, DecideCode.ALLOWED, 3, 100, 0, DecideFlag.DUPLICATE);
  const seen: number[] = [];
  readDecideReply(frames(r.finish())[0]!.body, (id, _c, _r, _t, _a, flags) => seen.push(id, flags));
  t.same(seen, [7, DecideFlag.DUPLICATE]);
});

t.test("DECIDE: a charge and a refund travel with their flags and the cost's magnitude", async (t) => {
  const w = new DecideBatchWriter();
  w.add(1, 2, 4_294_967_295, 60, "ns", "id", 1_000_000_000, DecideItemFlag.CHARGE | DecideItemFlag.REFUND);
  const [item] = decodeDecideItems(frames(w.take()!)[0]!.body);
  t.equal(item!.limit, 4_294_967_295);
  t.equal(item!.cost, 1_000_000_000);
  t.equal(item!.flags, DecideItemFlag.CHARGE | DecideItemFlag.REFUND);
});

t.test("CALL and CALL_REPLY round trip", async (t) => {
  const payload = Buffer.alloc(200 * 1024, 9);
  const c = frames(encodeCall(77, 65535, payload))[0]!;
  t.equal(c.type, FrameType.CALL);
  t.same(decodeCall(c.body), { callId: 77, method: 65535, payload });
  const r = frames(encodeCallReply(77, 1, Buffer.from("nope")))[0]!;
  t.same(decodeCallReply(r.body), { callId: 77, status: 1, payload: Buffer.from("nope") });
  t.throws(() => decodeCall(Buffer.alloc(5)), FrameError);
  t.throws(() => decodeCallReply(Buffer.from([0, 0, 0, 1, 2])), FrameError, "unknown status");
  t.throws(() => encodeCall(1, 1, Buffer.alloc(MAX_FRAME_BYTES)), FrameError);
});
