/**
 * Strings that are not well-formed Unicode (lone surrogates) are refused with 400 naming the
 * field: over the peer channel they would become U+FFFD, giving one identifier two counters
 * (local and forwarded) and distinct identifiers one. Well-formed text of any plane is kept
 * exactly. The cluster half of this is test/shard/cluster/lossless-keys.process.test.ts.
 */
import t from "tap";
import { limit, request, TEST_KEY } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";

const node = useTestNode(t);

const LONE = ["\ud800", "a\udc00", "\udbff\udbff", "x\ud83d", "\ude00y"];

t.test("a lone surrogate in namespace, product or identifier: 400 naming each field", async (t) => {
  for (const bad of LONE) {
    for (const field of ["namespace", "product", "identifier"] as const) {
      const body = { namespace: "uni", identifier: "lone-" + field, limit: 5, duration: 60, [field]: field === "product" ? "p" + bad : bad };
      const r = await limit(node.url, body);
      t.equal(r.status, 400, `${field} ${JSON.stringify(bad)}: 400`);
      t.same(
        r.json?.data?.details?.map((d: { field: string }) => d.field),
        [field],
        `details names ${field}`,
      );
      t.notOk(r.text.includes("\\ud8") || r.text.includes("\\udc") || r.text.includes("\\udb"), "the value is not echoed");
    }
  }
  const all = await limit(node.url, { namespace: "\ud800", product: "\udc00", identifier: "\ud800", limit: 5, duration: 60 });
  t.same(all.json?.data?.details?.map((d: { field: string }) => d.field).sort(), ["identifier", "namespace", "product"], "every bad field named");
});

t.test("batch items and resets: the field is named with its item", async (t) => {
  const post = (path: string, body: unknown) =>
    request(node.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const batch = await post("/limit/batch", {
    requests: [
      { namespace: "u", identifier: "ok", limit: 5, duration: 60 },
      { namespace: "u", identifier: "\ud800", limit: 5, duration: 60 },
    ],
  });
  t.equal(batch.status, 400);
  t.same(
    batch.json?.data?.details?.map((d: { field: string }) => d.field),
    ["requests[1].identifier"],
  );
  const reset = await post("/limit/reset", { namespace: "\udc00", identifier: "x" });
  t.equal(reset.status, 400);
  t.same(
    reset.json?.data?.details?.map((d: { field: string }) => d.field),
    ["namespace"],
  );
});

t.test("well-formed text of every plane is accepted and echoed exactly", async (t) => {
  for (const id of ["é", "中文", "😀", "a😀b\u{10ffff}", "\u0000x", "\ufffd"]) {
    const r = await limit(node.url, { namespace: "uni-ok", identifier: id, limit: 5, duration: 60 });
    t.equal(r.status, 200, JSON.stringify(id));
    t.equal(r.json?.data?.identifier, id, "identifier echoed exactly");
  }
  const replacement = await limit(node.url, { namespace: "uni-ok", identifier: "\ufffd", limit: 5, duration: 60 });
  t.equal(replacement.json?.data?.count, 2, "U+FFFD itself is an ordinary identifier with its own counter");
});
