// LEASE's request and reply (peer CALL method 17): the request is a one-item BATCH body,
// checked like any; a reply out of bounds is refused whole.
import t from "tap";
import { algorithmByName } from "../../../../src/algorithms/index.js";
import {
  decodeDebtNotice,
  decodeLeaseReply,
  decodeLeaseRequest,
  encodeDebtNotice,
  encodeLeaseReply,
  encodeLeaseRequest,
} from "../../../../src/shard/cluster/wire/lease-wire.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";

const query = { namespace: "api", identifier: "user-1", limit: 1_000_000, duration: 60, algorithm: algorithmByName("fixed-window")!, cost: 1 };

t.test("a request carries the query with the requests wanted as its cost", async (t) => {
  const q = decodeLeaseRequest(encodeLeaseRequest(query, 7812));
  t.match(q, { namespace: "api", identifier: "user-1", limit: 1_000_000, duration: 60, cost: 7812 });
  t.equal(q.algorithm.name, "fixed-window");
  t.throws(() => decodeLeaseRequest(encodeLeaseRequest({ ...query, limit: 10 }, 7812)), RangeError, "a cost above the limit is out of contract");
});

t.test("a reply: granted and the window, and nothing out of bounds", async (t) => {
  t.same(decodeLeaseReply(encodeLeaseReply(7812, 1_800_000_040_000)), { granted: 7812, windowStart: 1_800_000_040_000 });
  t.throws(() => decodeLeaseReply(encodeLeaseReply(2_000_000, 1_800_000_040_000)), RangeError, "more than any limit");
  t.throws(() => decodeLeaseReply(encodeLeaseReply(1, Number.NaN)), RangeError, "no time");
  t.throws(() => decodeLeaseReply(encodeLeaseReply(1, 1.5)), RangeError, "not whole ms");
  t.throws(() => decodeLeaseReply(Buffer.alloc(11)), RangeError, "short");
});

t.test("DEBT_NOTICE: a state key and a window start round-trip; a notice out of bounds is refused whole", async (t) => {
  const stateKey = stateKeyOf(0, 3600, ringKeyOf("ns", "用户-1"));
  t.same(decodeDebtNotice(encodeDebtNotice(stateKey, 1_800_000_000_000)), { stateKey, windowStart: 1_800_000_000_000 });
  t.throws(() => decodeDebtNotice(Buffer.alloc(8)), RangeError, "no state key");
  t.throws(() => decodeDebtNotice(encodeDebtNotice("not a state key", 0)), RangeError, "not a state key");
  t.throws(() => decodeDebtNotice(encodeDebtNotice(stateKey, -1)), RangeError, "a negative window start");
  t.throws(() => decodeDebtNotice(encodeDebtNotice(stateKey, 0.5)), RangeError, "a fractional one");
  t.throws(() => decodeDebtNotice(encodeDebtNotice(stateKey, NaN)), RangeError, "NaN");
  t.throws(() => decodeDebtNotice(Buffer.alloc(8 + 9 * 1024, 0x30)), RangeError, "longer than any state key");
});
