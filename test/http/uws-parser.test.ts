/**
 * What uWS's own HTTP parser does with requests it refuses or mis-frames, observed over raw
 * sockets (docs/security.md, item 7). These answers come from uWS before any handler runs:
 * HTML, Connection: close. Two upstream issues are pinned as they behave on each of our two
 * builds (src/http/uws.ts), so a uWS upgrade that changes them fails here and the document
 * gets updated:
 *   #1776: a request line split inside the HTTP version gets 505 on v20.4x (uws-pack), and is
 *          served on v20.57;
 *   #1305: a second Content-Length is ignored; the first one frames the body (both).
 */
import t from "tap";
import { uwsBuild } from "../../src/http/uws.js";
import { TEST_KEY } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { limitRequest, rawExchange } from "../harness/raw-http.js";
import { pipeliningSkip } from "../harness/run-workers.js";

const node = useTestNode(t);
const port = () => Number(new URL(node.url).port);
const body = JSON.stringify({ namespace: "parser", identifier: "p", limit: 1000, duration: 60 });
const head = `POST /limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\n`;

t.test("#1776: a request line split across segments", async (t) => {
  const full = limitRequest(body);
  for (const cut of [2, 4, 8]) {
    const r = await rawExchange(port(), [full.slice(0, cut), full.slice(cut)], { gapMs: 80, responses: 1 });
    t.equal(r.responses[0]?.status, 200, `split after ${JSON.stringify(full.slice(0, cut))}: served`);
  }
  const inVersion = full.indexOf("HTTP/1") + 6;
  const r = await rawExchange(port(), [full.slice(0, inVersion), full.slice(inVersion)], { gapMs: 80 });
  if (uwsBuild === "uws-pack 20.0.8") {
    t.equal(r.responses[0]?.status, 505, "v20.4x, split inside the version: 505 (upstream #1776 applies)");
    t.ok(r.closedByServer);
  } else {
    t.equal(r.responses[0]?.status, 200, "v20.57, split inside the version: served (upstream #1776 fixed)");
  }
});

const smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

// The bytes past the shorter length arrive in the same read as a second request: pipelining.
t.test("#1305: duplicate Content-Length, shorter first: the bytes after it are served as the next request", { skip: pipeliningSkip() }, async (t) => {
  const shortFirst = await rawExchange(
    port(),
    head + `Content-Length: ${body.length}\r\nContent-Length: ${body.length + smuggled.length}\r\n\r\n${body}${smuggled}`,
    {
      responses: 2,
    },
  );
  t.same(
    shortFirst.responses.map((x) => x.status),
    [200, 200],
    "shorter first: the bytes after it are served as the next request (upstream #1305 still applies)",
  );
  t.equal(shortFirst.responses[1]?.body, '{"status":"ok"}');
});

t.test("#1305: duplicate Content-Length, longer first: the body swallows what follows", async (t) => {
  const longFirst = await rawExchange(
    port(),
    head + `Content-Length: ${body.length + smuggled.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}${smuggled}`,
    {
      responses: 1,
    },
  );
  t.equal(longFirst.responses[0]?.status, 400, "longer first: the body swallows what follows, and is not JSON");
});

t.test("uWS's own refusals: HTML, Connection: close", async (t) => {
  const cases: [what: string, bytes: string, status: number][] = [
    ["Content-Length with Transfer-Encoding", head + `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n`, 400],
    ["HTTP/1.0", "GET /health HTTP/1.0\r\n\r\n", 505],
    ["bare LF line endings", "GET /health HTTP/1.1\nHost: x\n\n", 505],
    ["a request head over 4 KiB", `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(5000)}\r\n\r\n`, 431],
  ];
  for (const [what, bytes, status] of cases) {
    const r = await rawExchange(port(), bytes);
    t.equal(r.responses[0]?.status, status, `${what}: ${status}`);
    t.equal(r.responses[0]?.headers.connection, "close");
    t.match(r.rest, /<h1>/, "an HTML body (no Content-Length), not our envelope");
    t.ok(r.closedByServer, "closed");
  }
});
