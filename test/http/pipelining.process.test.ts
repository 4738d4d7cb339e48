/**
 * Pipelined requests over one raw TCP socket against a real 3-node cluster (issue 10, item 5).
 *
 * Keys the node asked owns are answered inside uWS's handler, so pipelining them works, in
 * order. A key owned by another node waits for its owner, and uWS (v20) closes a connection
 * whose next request is parsed while an answer is pending: what the client then gets is pinned
 * here as docs/security.md (item 4) and docs/api.md describe it. Answering them all is a todo:
 * it needs a uWS that holds pipelined requests. One request at a time on a keep-alive
 * connection (what clients do) is answered for every owner. With WORKERS > 1 no answer is given
 * in the handler (every decision crosses to the state owner), so any pipelining is closed.
 */
import t from "tap";
import { clearOfWindowEnd } from "../harness/contract.js";
import { closeAgents } from "../harness/http-client.js";
import { startCluster } from "../harness/cluster.js";
import { runWorkers } from "../harness/node-process.js";
import { limitRequest, rawExchange, rawSerial } from "../harness/raw-http.js";

t.teardown(closeAgents);

t.test("pipelining on a cluster node", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const node = cluster.nodes[0]!;
  const run = Date.now().toString(36);
  const request = (id: string) => limitRequest({ namespace: "test", identifier: id, limit: 5, duration: 3600 });
  const ask = (ids: string[]) => rawExchange(node.port, ids.map(request).join(""), { responses: ids.length, waitMs: 5000 });
  const identifiers = (responses: { body: string }[]) => responses.map((x) => JSON.parse(x.body).data?.identifier);

  const ownIds = (): string[] => {
    const ids: string[] = [];
    for (let i = 0; ids.length < 100; i++) if (cluster.ownerOf("test", `own-${run}-${i}`) === 0) ids.push(`own-${run}-${i}`);
    return ids;
  };

  if (runWorkers() === 1) {
    await t.test("100 pipelined requests for keys this node owns: 100 answers, in order", async (t) => {
      const ids = ownIds();
      const r = await ask(ids);
      t.equal(r.responses.length, 100);
      t.same(identifiers(r.responses), ids, "in the order sent");
      t.notOk(r.closedByServer, "the connection stays open");
    });
  } else {
    // With WORKERS > 1 no answer is written inside uWS's handler: every decision is the state
    // owner's, a thread away, so the first request's answer is pending when uWS parses the
    // second and it closes the connection, as for a forwarded key (docs/security.md, item 4).
    await t.test("WORKERS > 1: 100 pipelined requests for keys this node owns: the connection is closed, what arrived is whole answers in order", async (t) => {
      const ids = ownIds();
      const r = await ask(ids);
      t.ok(r.closedByServer, "uWS closes the connection at the second request");
      t.ok(r.responses.length < ids.length, `${r.responses.length} answers`);
      t.same(identifiers(r.responses), ids.slice(0, r.responses.length), "whatever arrived answers the requests in the order sent");
    });
  }

  await t.test("100 requests of mixed owners, one at a time on one connection: 100 answers, in order, counts exact", async (t) => {
    // 20 identifiers spread over the owners, 5 rounds on a limit of 4: rounds 1-4 allowed, the 5th a 429.
    const ids = Array.from({ length: 20 }, (_, i) => `serial-${run}-${i}`);
    t.equal(new Set(ids.map((id) => cluster.ownerOf("test", id))).size, 3, "every node owns some");
    const sent = Array.from({ length: 100 }, (_, i) => ids[i % 20]!);
    await clearOfWindowEnd(3600, 20_000);
    const r = await rawSerial(
      node.port,
      sent.map((id) => limitRequest({ namespace: "test", identifier: id, limit: 4, duration: 3600 })),
      { waitMs: 10_000 },
    );
    t.equal(r.responses.length, 100);
    t.same(identifiers(r.responses), sent, "in the order sent");
    t.same(
      r.responses.map((x) => [x.status, JSON.parse(x.body).data?.remaining]),
      sent.map((_, i) => (i < 80 ? [200, 3 - Math.floor(i / 20)] : [429, 0])),
      "each identifier counted exactly, wherever its owner is",
    );
    t.notOk(r.closedByServer);
  });

  await t.test("pipelined behind a request another node owns: the connection is closed, what arrived is whole answers in order", async (t) => {
    const pick = (prefix: string, here: boolean) => {
      for (let n = 0; ; n++) if ((cluster.ownerOf("test", `${prefix}-${n}`) === 0) === here) return `${prefix}-${n}`;
    };
    // Answered in the handler, then a forwarded one with one more behind it, all in one write:
    // 3 answers (~1 KiB) stay in uWS's 16 KiB cork buffer and are lost with it, 60 overflow it.
    for (const before of [3, 60]) {
      const ids = Array.from({ length: before }, (_, i) => pick(`before-${run}-${before}-${i}`, true));
      ids.push(pick(`behind-${run}-${before}`, false), pick(`after-${run}-${before}`, true));
      const r = await ask(ids);
      if (before === 60 && !r.closedByServer) {
        // 62 requests (~17 KiB) in one write are almost always one read. Should the kernel hand the
        // last one over after the forwarded answer was written, nothing is pending when it is parsed.
        t.equal(r.responses.length, ids.length, "read apart from the forwarded one: every answer");
      } else {
        t.ok(r.closedByServer, `${before} before the forwarded one: uWS closes the connection`);
        t.ok(r.responses.length <= before, `${r.responses.length} answers`);
      }
      t.same(identifiers(r.responses), ids.slice(0, r.responses.length), "whatever arrived answers the requests in the order sent");
    }
  });

  await t.test(
    "100 pipelined requests of mixed owners: 100 answers, in order",
    { todo: "uWS v20 closes a connection whose next request is parsed while an answer is pending (docs/security.md, item 4)" },
    async (t) => {
      const ids = Array.from({ length: 100 }, (_, i) => `mixed-${run}-${i}`);
      t.ok(new Set(ids.map((id) => cluster.ownerOf("test", id))).size === 3, "every node owns some");
      const r = await ask(ids);
      t.equal(r.responses.length, 100, `${r.responses.length} answers; connection closed by the server: ${r.closedByServer}`);
      t.same(identifiers(r.responses), ids);
    },
  );
});
