/**
 * POST /limit/charge with a charge_id on one real node (docs/api.md, Charge ids): a charge with
 * an id is counted at most once while its id is remembered, a retry gets the first answer
 * (`duplicate`), the id's bounds are a 400 that counts nothing, and the memory of ids is bounded
 * in bytes (a share of MAX_MEMORY_MB): an id that does not fit is refused, never counted.
 */
import t from "tap";
import { limit, post, request } from "../../harness/http-client.js";
import { startTestNode, useTestNode } from "../../harness/in-process-node.js";
import { clearOfWindowEnd, envelopeProblems, pool, uniqueId } from "../../harness/contract.js";
import { ChargeIds, chargeIdKey } from "../../../src/shard/local/charge-ids.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { CHARGE_IDS_SHARE } from "../../../src/shard/table/memory-budget.js";

const node = useTestNode(t);
const charge = (body: Record<string, unknown>, url = node.url) => post(url, "/limit/charge", body);
/** What the key counts now, asked with a peek (cost 0 counts nothing). */
const countOf = async (key: Record<string, unknown>, url = node.url) => {
  const r = await limit(url, { ...key, cost: 0 });
  return (key.limit as number) - r.json.data.remaining;
};

t.test("a charge with an id is counted once: a second one with the id gets the first answer, duplicate", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "charge-id", identifier: uniqueId("once"), limit: 1000, duration: 3600 };
  const first = await charge({ ...key, cost: 300, charge_id: "req-1" });
  t.equal(first.status, 200);
  t.same(envelopeProblems(first, "rate_limit"), []);
  t.same([first.json.data.count, first.json.data.charge_id, first.json.data.duplicate], [300, "req-1", false]);
  const again = await charge({ ...key, cost: 300, charge_id: "req-1" });
  t.equal(again.status, 200);
  t.same([again.json.data.count, again.json.data.remaining, again.json.data.duplicate], [300, 700, true], "the first answer, remembered");
  t.equal(await countOf(key), 300, "counted once");
  // The id names the charge, whatever the retry says it costs (the first one is what counted).
  t.equal((await charge({ ...key, cost: 5, charge_id: "req-1" })).json.data.duplicate, true);
  t.equal(await countOf(key), 300);

  const other = await charge({ ...key, cost: 10, charge_id: "req-2" });
  t.same([other.json.data.count, other.json.data.duplicate], [310, false], "another id is another charge");
  const plain = await charge({ ...key, cost: 10 });
  t.equal(plain.json.data.count, 320);
  t.equal(plain.json.data.charge_id, undefined, "an answer without an id is as before");
  t.equal(plain.json.data.duplicate, undefined);

  // The same id for another state of the identifier (another window) is another charge.
  const daily = { ...key, duration: 86_400 };
  t.equal((await charge({ ...daily, cost: 7, charge_id: "req-1" })).json.data.duplicate, false, "another window: counted");
  t.equal(await countOf(daily), 7);
  t.equal((await charge({ ...daily, cost: 7, charge_id: "req-1" })).json.data.duplicate, true);

  // A refund with an id is given back once too.
  const refund = { ...key, cost: -100, charge_id: "refund-1" };
  t.equal((await charge(refund)).json.data.count, 220);
  t.same([(await charge(refund)).json.data.count, (await charge(refund)).json.data.duplicate], [220, true]);
  t.equal(await countOf(key), 220, "given back once");
});

t.test("charge_id bounds: 1 to 64 visible ASCII characters, else a 400 naming it, nothing counted", async (t) => {
  const key = { namespace: "charge-id", identifier: uniqueId("bounds"), limit: 1000, duration: 3600, cost: 5 };
  for (const id of ["", "x".repeat(65), "a b", "tab\there", "é", "line\n", "\u0000", 5, null, true, ["a"], { id: "a" }]) {
    const r = await charge({ ...key, charge_id: id });
    t.equal(r.status, 400, `charge_id ${JSON.stringify(id)}`);
    t.same(
      r.json.data.details,
      [{ field: "charge_id", message: "must be a string of 1 to 64 visible ASCII characters (! to ~, no space)" }],
      `names the field: ${JSON.stringify(id)}`,
    );
  }
  for (const id of ["a", "!", "~", "x".repeat(64), "550e8400-e29b-41d4-a716-446655440000", '{"quoted"}\\']) {
    const r = await charge({ ...key, charge_id: id });
    t.equal(r.status, 200, `charge_id ${JSON.stringify(id)}`);
    t.equal(r.json.data.charge_id, id, "echoed as sent");
  }
  t.equal(await countOf(key), 30, "the six valid ones counted, no refused one");
});

t.test("the memory of ids is bounded in bytes: an id that does not fit is refused uncounted, and ids are forgotten after CHARGE_ID_MEMORY_MS", async (t) => {
  // MAX_MEMORY_MB=16: the ids get 16 MiB / 64 = 256 KiB.
  const small = await startTestNode({ MAX_MEMORY_MB: "16", CHARGE_ID_MEMORY_MS: "3000" });
  t.teardown(() => small.stop());
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "charge-id", identifier: uniqueId("memory") + "-".repeat(400), limit: 100_000, duration: 3600 };
  const idOf = (i: number) => String(i).padStart(64, "0");
  // Every key is as long as the next: each costs the same, so exactly this many fit.
  const each = ChargeIds.cost(chargeIdKey(idOf(0), stateKeyOf(0, 3600, ringKeyOf(key.namespace, key.identifier))));
  const fit = Math.floor((16 * 1024 * 1024 * CHARGE_IDS_SHARE) / each);
  const statuses = await pool(
    Array.from({ length: fit + 50 }, (_, i) => i),
    8,
    async (i) => (await charge({ ...key, cost: 1, charge_id: idOf(i) }, small.url)).status,
  );
  t.equal(statuses.filter((s) => s === 200).length, fit, `${fit} ids of ${each} bytes fit in 256 KiB`);
  t.equal(statuses.filter((s) => s === 500).length, 50, "the rest are refused (500)");
  t.equal(await countOf(key, small.url), fit, "and only the remembered ones counted");
  const metrics = (await request(small.url + "/metrics")).text;
  const stored = Number(/^ringlimit_stored_bytes (\d+)/m.exec(metrics)?.[1]);
  t.ok(stored >= fit * each, `ringlimit_stored_bytes (${stored}) counts the remembered ids (${fit * each} bytes)`);
  const retry = await charge({ ...key, cost: 1, charge_id: idOf(0) }, small.url);
  t.same([retry.status, retry.json.data.duplicate], [200, true], "a remembered id is still answered once");
  // Past CHARGE_ID_MEMORY_MS the ids are forgotten: room again, and an old id is a new charge.
  await new Promise((r) => setTimeout(r, 3500));
  const later = await charge({ ...key, cost: 1, charge_id: idOf(0) }, small.url);
  t.same([later.status, later.json.data.duplicate], [200, false], "forgotten after its time: counted again (the documented bound)");
  t.equal(await countOf(key, small.url), fit + 1);
});
