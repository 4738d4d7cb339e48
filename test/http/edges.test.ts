/**
 * HTTP edges over raw sockets: an oversized body (declared or chunked) gets 413 and the
 * connection is closed, even when another request is pipelined behind it.
 *
 * Before (commit 81f8649): each of these answered 413 and then served the pipelined
 * GET /health on the same connection, which stayed open.
 */
import t from "tap";
import { useTestNode } from "../harness/in-process-node.js";
import { rawExchange, limitRequest } from "../harness/raw-http.js";
import { TEST_KEY } from "../harness/http-client.js";

const node = useTestNode(t);
const port = () => Number(new URL(node.url).port);

const OVER = 16 * 1024 + 1;
const head = (extra: string) =>
  `POST /limit HTTP/1.1\r\nHost: ringlimit\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\n${extra}\r\n`;
const chunk = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
const HEALTH = "GET /health HTTP/1.1\r\nHost: ringlimit\r\n\r\n";

const oversized = {
  "declared Content-Length": head(`Content-Length: ${OVER}\r\n`) + "x".repeat(OVER),
  chunked: head("Transfer-Encoding: chunked\r\n") + chunk("x".repeat(OVER)) + "0\r\n\r\n",
};

for (const [what, bytes] of Object.entries(oversized)) {
  t.test(`413 (${what}) closes the connection`, async (t) => {
    const r = await rawExchange(port(), bytes);
    t.equal(r.responses.length, 1, "one answer");
    t.equal(r.responses[0]?.status, 413);
    t.equal(JSON.parse(r.responses[0]?.body ?? "{}").data?.error, "Payload Too Large", "the error envelope");
    t.equal(r.responses[0]?.headers.connection, "close", "says Connection: close");
    t.ok(r.closedByServer, "the server closed the connection");
  });

  t.test(`413 (${what}) with a request pipelined behind it: that request is not served`, async (t) => {
    const r = await rawExchange(port(), bytes + HEALTH);
    t.ok(r.closedByServer, "the server closed the connection");
    t.ok(r.responses.length <= 1, "at most one answer");
    for (const res of r.responses) t.equal(res.status, 413, "and it is the 413");
    t.notOk(r.rest.includes("HTTP/1.1"), "nothing else was sent");
  });
}

t.test("a chunked body streamed past 16 KiB over several writes: 413 and closed before the rest is read", async (t) => {
  const parts = [head("Transfer-Encoding: chunked\r\n"), ...Array.from({ length: 8 }, () => chunk("y".repeat(4096)))];
  const r = await rawExchange(port(), parts, { gapMs: 30 });
  t.equal(r.responses[0]?.status, 413);
  t.ok(r.closedByServer, "closed");
});

t.test("a body at exactly 16 KiB is served and keeps the connection", async (t) => {
  const body = JSON.stringify({ namespace: "edges", identifier: "exact-16k", limit: 5, duration: 60, pad: "" });
  const padded = body.replace('"pad":""', `"pad":"${"p".repeat(16 * 1024 - Buffer.byteLength(body))}"`);
  t.equal(Buffer.byteLength(padded), 16 * 1024);
  const r = await rawExchange(port(), limitRequest(padded) + HEALTH, { responses: 2 });
  t.same(
    r.responses.map((x) => x.status),
    [200, 200],
  );
  t.notOk(r.closedByServer, "still open");
});
