import t from "tap";
import { createSecretKey, randomBytes } from "node:crypto";
import { FrameType, MAX_FRAME_BYTES, TAG_BYTES } from "../../../src/peer/wire/constants.js";
import { FrameAuthError, FrameError } from "../../../src/peer/errors.js";
import { FrameDecoder, encodeFrame, encodeHandshakeFrame } from "../../../src/peer/wire/frame.js";
import { FrameOpener, FrameSealer } from "../../../src/peer/link/session.js";

// The framing itself is exercised with untagged (handshake) frames; tags are below.

function collect(max?: number): { dec: FrameDecoder; got: Array<[number, string]> } {
  const got: Array<[number, string]> = [];
  const dec = new FrameDecoder((type, body) => got.push([type, body.toString("hex")]), max);
  return { dec, got };
}

const payloads = [Buffer.alloc(0), Buffer.from("a"), Buffer.from("hello world"), Buffer.alloc(70_000, 7)];
const frames = payloads.map((p, i) => encodeHandshakeFrame((i % 10) + 1, p));
const stream = Buffer.concat(frames);
const expected = payloads.map((p, i): [number, string] => [(i % 10) + 1, p.toString("hex")]);

t.test("frame layout is u32 BE length (type + payload), u8 type, payload", async (t) => {
  const f = encodeHandshakeFrame(FrameType.PING, Buffer.from([1, 2, 3]));
  t.same([...f], [0, 0, 0, 4, FrameType.PING, 1, 2, 3]);
  const sealed = encodeFrame(FrameType.PING, Buffer.from([1, 2, 3]));
  t.same([...sealed.subarray(0, 8)], [0, 0, 0, 4 + TAG_BYTES, FrameType.PING, 1, 2, 3], "a sealed frame's length counts its tag");
  t.equal(sealed.length, 8 + TAG_BYTES);
});

t.test("round trip: all frames in one chunk", async (t) => {
  const { dec, got } = collect();
  dec.push(stream);
  t.same(got, expected);
  t.equal(dec.buffered, 0);
});

t.test("round trip: fed byte by byte", async (t) => {
  const { dec, got } = collect();
  for (let i = 0; i < stream.length; i++) dec.push(stream.subarray(i, i + 1));
  t.same(got, expected);
  t.equal(dec.buffered, 0);
});

t.test("round trip: arbitrary chunk boundaries", async (t) => {
  let seed = 42;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let round = 0; round < 50; round++) {
    const { dec, got } = collect();
    for (let i = 0; i < stream.length;) {
      const n = 1 + rnd(round % 2 === 0 ? 20 : 40_000);
      dec.push(stream.subarray(i, i + n));
      i += n;
    }
    t.same(got, expected, `round ${round}`);
  }
});

t.test("a body handed to the callback is valid during the callback", async (t) => {
  // Split so that the second frame is decoded from the decoder's own buffer.
  const seen: string[] = [];
  const dec = new FrameDecoder((_type, body) => seen.push(body.toString()));
  const s = Buffer.concat([encodeHandshakeFrame(1, Buffer.from("first")), encodeHandshakeFrame(2, Buffer.from("second"))]);
  dec.push(s.subarray(0, 13));
  dec.push(s.subarray(13));
  t.same(seen, ["first", "second"]);
});

t.test("a length above the maximum is an error as soon as the header arrives", async (t) => {
  const { dec, got } = collect();
  const header = Buffer.alloc(4);
  header.writeUInt32BE(MAX_FRAME_BYTES + 1);
  t.throws(() => dec.push(header), FrameError);
  t.same(got, []);
});

t.test("the maximum length itself is accepted", async (t) => {
  const { dec, got } = collect();
  dec.push(encodeHandshakeFrame(FrameType.CALL, Buffer.alloc(MAX_FRAME_BYTES - 1)));
  t.equal(got.length, 1);
  t.throws(() => encodeFrame(FrameType.CALL, Buffer.alloc(MAX_FRAME_BYTES - TAG_BYTES)), FrameError);
});

t.test("a lowered maximum (before the handshake) is enforced", async (t) => {
  const { dec } = collect(4096);
  t.throws(() => dec.push(encodeHandshakeFrame(FrameType.HELLO, Buffer.alloc(5000))), FrameError);
});

t.test("zero length and unknown types are errors", async (t) => {
  t.throws(() => collect().dec.push(Buffer.from([0, 0, 0, 0])), FrameError);
  t.throws(() => collect().dec.push(Buffer.from([0, 0, 0, 1, 0])), FrameError);
  t.throws(() => collect().dec.push(Buffer.from([0, 0, 0, 1, 11])), FrameError);
  t.throws(() => collect().dec.push(Buffer.from([0, 0, 0, 5, 200, 1])), FrameError, "type checked before the body arrives");
});

t.test("garbage is rejected and nothing is delivered", async (t) => {
  const { dec, got } = collect();
  t.throws(() => dec.push(Buffer.from("GET / HTTP/1.1\r\n\r\n")), FrameError);
  t.same(got, []);
});

t.test("frames before a bad one are delivered, nothing after it", async (t) => {
  const { dec, got } = collect();
  const bad = Buffer.from([0xff, 0xff, 0xff, 0xff, 1]);
  t.throws(() => dec.push(Buffer.concat([frames[1]!, bad, frames[2]!])), FrameError);
  t.same(got, [expected[1]]);
});

t.test("stop() inside the callback drops the rest of the chunk", async (t) => {
  const got: number[] = [];
  const dec: FrameDecoder = new FrameDecoder((type) => {
    got.push(type);
    dec.stop();
  });
  dec.push(stream);
  dec.push(stream);
  t.same(got, [1]);
});

// ------------------------------------------------------------------ tags

function sealedPair(): { sealer: FrameSealer; dec: FrameDecoder; got: string[] } {
  const key = createSecretKey(randomBytes(32));
  const got: string[] = [];
  const dec = new FrameDecoder((_type, body) => got.push(body.toString()));
  dec.opener = new FrameOpener(key);
  return { sealer: new FrameSealer(key), dec, got };
}
const ping = (text: string): Buffer => encodeFrame(FrameType.PING, Buffer.from(text));

t.test("sealed frames open in order, across chunks, and the tag is not delivered", async (t) => {
  const { sealer, dec, got } = sealedPair();
  const bytes = Buffer.concat([sealer.seal(ping("a")), sealer.seal(Buffer.concat([ping("bb"), ping("ccc")]))]);
  for (let i = 0; i < bytes.length; i += 7) dec.push(bytes.subarray(i, i + 7));
  t.same(got, ["a", "bb", "ccc"]);
  t.equal(sealer.seq, 3);
  t.equal(dec.opener!.seq, 3);
});

t.test("every flipped bit of a sealed frame is refused", async (t) => {
  const key = createSecretKey(randomBytes(32));
  const frame = new FrameSealer(key).seal(ping("payload"));
  let refused = 0;
  for (let bit = 0; bit < frame.length * 8; bit++) {
    const bad = Buffer.from(frame);
    bad[bit >> 3]! ^= 1 << (bit & 7);
    const got: Buffer[] = [];
    const dec = new FrameDecoder((_type, body) => got.push(body));
    dec.opener = new FrameOpener(key);
    try {
      dec.push(bad);
      // A flipped length bit may only make the decoder wait for more bytes.
      if (got.length === 0) refused++;
    } catch (err) {
      if (err instanceof FrameError) refused++;
    }
  }
  t.equal(refused, frame.length * 8, `all ${frame.length * 8} single-bit changes refused or never delivered`);
});

t.test("replayed, reordered, dropped, foreign and unsealed frames are refused", async (t) => {
  const { sealer } = sealedPair();
  const key = createSecretKey(randomBytes(32));
  const s = new FrameSealer(key);
  const f0 = s.seal(ping("zero"));
  const f1 = s.seal(ping("one"));
  const f2 = s.seal(ping("two"));
  const attempt = (...chunks: Buffer[]): { got: string[]; error: unknown } => {
    const got: string[] = [];
    const dec = new FrameDecoder((_type, body) => got.push(body.toString()));
    dec.opener = new FrameOpener(key);
    try {
      for (const c of chunks) dec.push(c);
      return { got, error: null };
    } catch (err) {
      return { got, error: err };
    }
  };
  t.same(attempt(f0, f1, f2).got, ["zero", "one", "two"], "in order: all delivered");
  const replay = attempt(f0, f1, f1);
  t.same(replay.got, ["zero", "one"]);
  t.type(replay.error, FrameAuthError, "replayed");
  t.type(attempt(f1).error, FrameAuthError, "reordered / first one dropped");
  t.type(attempt(f0, f2).error, FrameAuthError, "one dropped");
  t.type(attempt(sealer.seal(ping("zero"))).error, FrameAuthError, "sealed with another connection's key");
  t.type(attempt(ping("zero")).error, FrameAuthError, "not sealed at all");
  t.type(attempt(Buffer.from([0, 0, 0, 5, FrameType.PING, 1, 2, 3, 4])).error, FrameAuthError, "shorter than a tag");
});
