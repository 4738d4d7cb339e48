import t from "tap";
import { FrameType, MAX_FRAME_BYTES } from "../../src/peer/constants.js";
import { FrameError } from "../../src/peer/errors.js";
import { FrameDecoder, encodeFrame } from "../../src/peer/frame.js";

function collect(max?: number): { dec: FrameDecoder; got: Array<[number, string]> } {
  const got: Array<[number, string]> = [];
  const dec = new FrameDecoder((type, body) => got.push([type, body.toString("hex")]), max);
  return { dec, got };
}

const payloads = [Buffer.alloc(0), Buffer.from("a"), Buffer.from("hello world"), Buffer.alloc(70_000, 7)];
const frames = payloads.map((p, i) => encodeFrame((i % 10) + 1, p));
const stream = Buffer.concat(frames);
const expected = payloads.map((p, i): [number, string] => [(i % 10) + 1, p.toString("hex")]);

t.test("frame layout is u32 BE length (type + payload), u8 type, payload", async (t) => {
  const f = encodeFrame(FrameType.PING, Buffer.from([1, 2, 3]));
  t.same([...f], [0, 0, 0, 4, FrameType.PING, 1, 2, 3]);
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
  const s = Buffer.concat([encodeFrame(1, Buffer.from("first")), encodeFrame(2, Buffer.from("second"))]);
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
  dec.push(encodeFrame(FrameType.CALL, Buffer.alloc(MAX_FRAME_BYTES - 1)));
  t.equal(got.length, 1);
  t.throws(() => encodeFrame(FrameType.CALL, Buffer.alloc(MAX_FRAME_BYTES)), FrameError);
});

t.test("a lowered maximum (before the handshake) is enforced", async (t) => {
  const { dec } = collect(4096);
  t.throws(() => dec.push(encodeFrame(FrameType.HELLO, Buffer.alloc(5000))), FrameError);
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
