// The CALL table's receiving end on a real node, reached by a holder of the cluster secret
// over real TCP: an unknown method, a payload its row's decoder refuses and a handler that
// refuses each answer an error of their own, and the node goes on answering calls and callers.

import t from "tap";
import { PeerError } from "../../../../src/peer/index.js";
import { CallMethod } from "../../../../src/shard/cluster/wire/call-methods.js";
import { decodeHoldReply } from "../../../../src/shard/cluster/wire/lease-wire.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";
import { closeAgents } from "../../../harness/http-client.js";
import { memberClient } from "../../../peer/helpers.js";

t.teardown(closeAgents);

const refusal = async (call: Promise<Buffer>): Promise<string> =>
  call.then(
    () => "answered",
    (err: unknown) => (err instanceof PeerError ? `${err.code}: ${err.message}` : String(err)),
  );

t.test("a real node answers each CALL by its row, and refuses what no row or decoder admits", async (t) => {
  const cluster = await startCluster(2);
  t.teardown(() => cluster.stop());
  const peer = await memberClient(t, cluster, 0, "caller");

  t.equal(await refusal(peer.call(99, Buffer.alloc(0))), "remote: unknown call method 99", "no row: an error naming the method");
  t.equal(await refusal(peer.call(CallMethod.BATCH, Buffer.from([1, 2, 3]))), "remote: BATCH too short", "the row's decoder refuses the payload");
  t.equal(
    await refusal(peer.call(CallMethod.LEAVE, Buffer.from(cluster.members[1]!))),
    "remote: a member may announce only its own leave",
    "the handler refuses a leave in another member's name",
  );
  t.equal(await metric(cluster.nodes[0]!, "ringlimit_ring_members"), 2, "and nobody left the ring");
  t.match(await refusal(peer.call(CallMethod.TOP, Buffer.from([0]))), /^remote: /, "a TOP that does not decode is refused");
  t.match(await refusal(peer.call(CallMethod.DEBT_NOTICE, Buffer.alloc(8))), /^remote: /, "so is a DEBT_NOTICE without a state key");

  // Rows that answer: HOLD's reply decodes, MERGE_STATES of no records merges none.
  const hold = decodeHoldReply(await peer.call(CallMethod.HOLD, Buffer.alloc(0)));
  t.type(hold.held, "boolean");
  t.equal((await peer.call(CallMethod.MERGE_STATES, Buffer.alloc(0))).readUInt32BE(0), 0, "MERGE_STATES of nothing: 0 merged");
  t.equal((await hit(cluster.nodes[0]!, cluster.identifierOwnedBy(0, "after-calls"), 5)).status, 200, "callers are still answered");
});
