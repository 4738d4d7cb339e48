import t from "tap";
import { admitState, checkState } from "../../../src/shard/records/state-check.js";
import { decodeStates, encodeStates, forEachAgedRecord } from "../../../src/shard/records/state-records.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";

// A window carried into the receiver's next window by a skewed hand-off (algorithms/ages.ts)
// is sent on, by a hand-off or a replica, as begun at the send: the peer channel never carries
// a start after the send, so the receiver's check stays as strict as for a forged state.

const D = 60_000;
const T0 = 1_800_000_000_000; // a window start
const now = T0 + 40_000;

t.test("a carried window leaves as begun at the send, its expiry moved back as far, and lands in the same window on a clock in step", async (t) => {
  for (const [code, b, c, ownExpiry] of [
    [0, 15, 0, T0 + 2 * D],
    [1, 6, 9, T0 + 3 * D],
  ] as const) {
    const key = stateKeyOf(code, 60, ringKeyOf("ns", "carried"));
    const state = { a: T0 + D, b, c, expiresAt: ownExpiry / 1000, origin: 7, born: T0 / 1000 };
    const [record] = decodeStates(encodeStates([{ key, state }], now));
    t.equal(record!.state.a, 0, `${key}: age 0, begun at the send`);
    t.equal(record!.state.expiresInS, (ownExpiry - (T0 + D - now) - now) / 1000, "expiring as a state begun then would");
    t.equal(checkState(key, { ...record!.state }), "ok", "within every bound a peer's state is held to");
    const here = admitState(key, record!.state, now + 3000);
    t.match(here, { a: T0 + D, b, c }, "the receiver carries it into the same window");
  }
});

t.test("a window of the current one leaves unchanged", async (t) => {
  const key = stateKeyOf(0, 60, ringKeyOf("ns", "current"));
  const [record] = decodeStates(encodeStates([{ key, state: { a: T0, b: 15, c: 0, expiresAt: (T0 + D) / 1000, origin: 7, born: T0 / 1000 } }], now));
  t.same([record!.state.a, record!.state.expiresInS], [40_000, 20], "its age and expiry as they are");
});

t.test("forEachAgedRecord visits what decodeStates returns, and refuses a batch that does not split into records before visiting any", async (t) => {
  const records = [0, 1, 2, 3].map((code) => ({
    key: stateKeyOf(code, 60, ringKeyOf("ns", `id-${code}-é`)),
    state: { a: T0, b: 5 + code, c: code, expiresAt: (T0 + 2 * D) / 1000, origin: 100 + code, born: T0 / 1000 },
  }));
  const batch = encodeStates(records, now);
  const visited: unknown[] = [];
  // The visitor gets one reused object: what it keeps, it copies (as the receive path does).
  forEachAgedRecord(batch, (key, state) => visited.push({ key, state: { ...state } }));
  t.same(visited, decodeStates(batch), "the same keys and aged states, in order");
  for (const cut of [1, batch.length - 1]) {
    let seen = 0;
    t.throws(() => forEachAgedRecord(batch.subarray(0, cut), () => seen++), RangeError, `cut at ${cut} bytes: refused`);
    t.equal(seen, 0, "and nothing of it was visited");
  }
  const bad = Buffer.from(batch);
  bad.writeUInt16BE(0xffff, 0);
  t.throws(() => forEachAgedRecord(bad, () => {}), RangeError, "a key length beyond MAX_KEY_BYTES: refused");
});
