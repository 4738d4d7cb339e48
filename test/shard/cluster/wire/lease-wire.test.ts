// LEASE's request and reply (peer CALL method 17): the request is a one-item BATCH body,
// checked like any; a reply out of bounds is refused whole.
import t from "tap";
import { algorithmByName } from "../../../../src/algorithms/index.js";
import { decodeLeaseReply, decodeLeaseRequest, encodeLeaseReply, encodeLeaseRequest } from "../../../../src/shard/cluster/wire/lease-wire.js";

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
