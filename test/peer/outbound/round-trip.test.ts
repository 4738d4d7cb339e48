/** What a PONG tells the client: the round trip on the monotonic clock, the peer's clock offset on the wall clock. */
import t from "tap";
import { FRAME_HEADER_BYTES, TAG_BYTES } from "../../../src/peer/wire/constants.js";
import { encodePong } from "../../../src/peer/wire/messages.js";
import { RoundTrip } from "../../../src/peer/outbound/round-trip.js";

const body = (frame: Buffer) => frame.subarray(FRAME_HEADER_BYTES, frame.length - TAG_BYTES);

t.test("round trip and offset: the peer read its clock half a round trip ago", async (t) => {
  const rt = new RoundTrip();
  t.ok(Number.isNaN(rt.rttMs) && Number.isNaN(rt.clockOffsetMs), "NaN until measured");
  // PING sent at monotonic 1000; the peer, 30 s ahead, answered at its wall 1_700_000_030_005;
  // the PONG arrives at monotonic 1010, wall 1_700_000_000_010.
  t.equal(rt.measure(body(encodePong(1_000, 1_700_000_030_005)), 1_010, 1_700_000_000_010), 10);
  t.equal(rt.rttMs, 10);
  t.equal(rt.clockOffsetMs, 30_000);
});

t.test("an older peer's 8-byte PONG measures the round trip but no offset", async (t) => {
  const rt = new RoundTrip();
  const old = Buffer.alloc(8);
  old.writeDoubleBE(500, 0);
  t.equal(rt.measure(old, 502.5, Date.now()), 2.5);
  t.ok(Number.isNaN(rt.clockOffsetMs));
});

t.test("a PONG of another size is a protocol error", async (t) => {
  t.throws(() => new RoundTrip().measure(Buffer.alloc(12), 1, 1), /PONG body must be 8 or 16 bytes/);
});
