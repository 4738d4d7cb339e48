/**
 * A member started with another CLUSTER_SECRET (issue 41 item 1). It can authenticate with
 * none of its members, so its ring is itself alone: before, it answered /ready 200 with
 * quorum 0 and decided every key it was sent on its own count (a limit of 3 let 4 through
 * across two nodes), and both sides logged each failed handshake with its stack (28 entries
 * of ~1.2 kB in 10 s). Now it is not ready and says why, its members stay ready and count
 * alone, and each side logs a refused handshake in one short line per peer, repeated at most
 * once per back-off interval.
 */
import t from "tap";
import { closeAgents, limit, request } from "../../../harness/http-client.js";
import { CLUSTER_SECRET, PATIENT_PEERS, waitForRing } from "../../../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../../../harness/node-process.js";
import { freePort } from "../../../harness/ports.js";
import { sleep, until } from "../../../harness/wait.js";
import { generateClusterSecret } from "../../../../src/peer/link/cluster-secret.js";

t.teardown(closeAgents);

/** The window over which log lines are counted: fixed, so the bound below is a count, not a rate. */
const WINDOW_MS = 10_000;

t.test("three members, one with a wrong CLUSTER_SECRET", async (t) => {
  const httpPorts = [await freePort(), await freePort(), await freePort()];
  const peerPorts = [await freePort(), await freePort(), await freePort()];
  const members = peerPorts.map((p) => `127.0.0.1:${p}`);
  const env = (i: number, secret: string) => ({
    PORT: String(httpPorts[i]),
    PEER_HOST: "127.0.0.1",
    PEER_PORT: String(peerPorts[i]),
    PEERS: members.join(","),
    CLUSTER_SECRET: secret,
    LOG_LEVEL: "info",
    ...PATIENT_PEERS,
  });
  const nodes: NodeProcess[] = await Promise.all([
    spawnNode(env(0, CLUSTER_SECRET)),
    spawnNode(env(1, CLUSTER_SECRET)),
    spawnNode(env(2, generateClusterSecret()), { waitReady: false }),
  ]);
  t.teardown(() => Promise.all(nodes.map((n) => n.kill())).then(() => undefined));
  const [a, b, wrong] = nodes as [NodeProcess, NodeProcess, NodeProcess];
  await waitForRing([a, b], 2, 30_000);

  const ready = await until(
    "the member with the wrong secret answers /ready 503",
    async () => (await request(wrong.url + "/ready").catch(() => ({ status: 0 }))).status === 503,
    30_000,
  );
  t.ok(ready);
  // Once it has tried each member: its reason names the refused authentication.
  await until("its reason names the secret", async () => /authenticat/.test((await request(wrong.url + "/ready")).text), 30_000);
  const reply = await request(wrong.url + "/ready");
  t.equal(reply.status, 503, "not ready");
  t.match(reply.json.reason, /CLUSTER_SECRET/, "the reason names the setting to check");
  for (const n of [a, b]) t.equal((await request(n.url + "/ready")).status, 200, "the two members that agree stay ready");

  // A limit of 3 across the three doors: exactly 3 admitted undegraded. The wrong member's
  // answers are degraded (uncounted), never a count of its own.
  let admitted = 0;
  let degraded = 0;
  for (let i = 0; i < 12; i++) {
    const r = await limit(nodes[i % 3]!.url, { namespace: "secret", identifier: "k", limit: 3, duration: 3600 });
    t.equal(r.status === 200 || r.status === 429, true, `answer ${i} is 200 or 429`);
    if (r.status === 200 && r.json.data.degraded === true) degraded++;
    else if (r.status === 200) admitted++;
  }
  t.equal(admitted, 3, "a limit of 3 admits exactly 3 across the nodes");
  t.equal(degraded, 4, "the wrong member's 4 answers are degraded, none counted");

  // Log lines over a fixed window, after the first attempts: each side says why once per
  // peer and then at most once per back-off interval (REFUSAL_LOG_INTERVAL_MS, 10 s), with
  // no stack. Invariant: lines per peer per window <= 2 (the window can straddle one repeat).
  const marks = nodes.map((n) => n.output().length);
  await sleep(WINDOW_MS);
  const windowLines = nodes.map((n, i) =>
    n
      .output()
      .slice(marks[i])
      .split("\n")
      .filter((l) => l.trim() !== ""),
  );
  for (const [i, lines] of windowLines.entries()) {
    const bytes = lines.reduce((s, l) => s + l.length, 0);
    t.comment(`node ${i}: ${lines.length} lines, ${bytes} bytes in ${WINDOW_MS} ms`);
    t.notOk(
      lines.some((l) => /"stack"|\n\s+at /.test(l)),
      `node ${i} logs no stack`,
    );
  }
  const refusedLines = (lines: string[]) => lines.filter((l) => /handshake refused|refused authentication|connections refused/.test(l));
  t.ok(refusedLines(windowLines[2]!).length <= 4, "the wrong member: at most 2 lines per peer in the window");
  for (const i of [0, 1]) {
    // One peer refuses it (the wrong member) outbound, and the server's summary of refusals inbound.
    t.ok(refusedLines(windowLines[i]!).length <= 3, `member ${i}: at most 2 lines for its outbound attempts and 1 summary`);
    t.ok(windowLines[i]!.length <= 6, `member ${i}: ${windowLines[i]!.length} lines in the window, bounded`);
  }
  t.match(wrong.output(), /CLUSTER_SECRET/, "the wrong member's log names the setting to check");
});

t.test("a ring of one: PEERS listing absent members is not ready, PEERS of itself alone is", async (t) => {
  const peerPort = await freePort();
  const self = `127.0.0.1:${peerPort}`;
  const absent = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
  const common = { PEER_HOST: "127.0.0.1", PEER_PORT: String(peerPort), CLUSTER_SECRET, ...PATIENT_PEERS, FAILURE_TIMEOUT_MS: "500" };
  const lone = await spawnNode({ ...common, PEERS: [self, ...absent].join(",") }, { waitReady: false });
  t.teardown(() => lone.kill());
  await until("it has found the others down", () => /no cluster quorum yet/.test(lone.output()), 30_000);
  // The cluster can say so before the HTTP port listens (with WORKERS > 1 the threads start first).
  await until("it answers /ready", async () => (await request(lone.url + "/ready").catch(() => ({ status: 0 }))).status !== 0, 30_000);
  const r = await request(lone.url + "/ready");
  t.equal(r.status, 503, "not ready before it has reached a majority of its members");
  t.match(r.json.reason, /no quorum yet: sees 1 of 3 members/, "and says so");
  await lone.kill();
  const single = await spawnNode({ ...common, PEERS: self });
  t.teardown(() => single.kill());
  t.equal((await request(single.url + "/ready")).status, 200, "PEERS of itself alone: ready at once");
});
