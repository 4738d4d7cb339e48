/**
 * `npm run cluster` (src/tools/local-cluster.ts), run as a real process that starts real
 * nodes: its flags and their defaults, PORT / PEER_PORT / HOST taken from the environment,
 * bad command lines refused before anything starts, a node that cannot start ending the
 * cluster, a node that dies once running leaving the others running until it is started again
 * on request, and Ctrl-C (SIGTERM to the tool alone) stopping every node.
 */
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { closeAgents, limit, request } from "../harness/http-client.js";
import { spawnTool, type ToolProcess } from "../harness/node-process.js";
import { freePort, freePortRange } from "../harness/ports.js";
import { until } from "../harness/wait.js";

t.teardown(closeAgents);

const TOOL = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/tools/local-cluster.js");

function runTool(args: string[], env: Record<string, string> = {}): ToolProcess {
  return spawnTool([process.execPath, TOOL, ...args], { LOG_LEVEL: "warn", ...env });
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

const apiKey = (tool: ToolProcess) => /API key: (svc_sk_\S+)/.exec(tool.stdout())?.[1];

async function ready(url: string): Promise<boolean> {
  try {
    return (await request(url + "/ready", { timeoutMs: 500 })).status === 200;
  } catch {
    return false;
  }
}

t.test("--help prints every option with its default and starts nothing", async (t) => {
  const port = await freePort();
  const tool = runTool(["--help"], { PORT: String(port) });
  t.teardown(() => tool.kill());
  const { code } = await tool.exited;
  t.equal(code, 0);
  const help = tool.stdout();
  t.match(help, /^Usage: npm run cluster -- /);
  t.match(help, /--nodes N .*\(default 3\)/);
  t.match(help, new RegExp(`--port P .*\\(default ${port}, from PORT\\)`), "PORT from the environment is the default");
  t.match(help, /--peer-port Q .*\(default --port \+ 1000\)/);
  t.match(help, /--host H .*\(default 127\.0\.0\.1\)/);
  t.match(help, /-h, --help/);
  t.notOk(await listening(port), "no node listens on the default port");

  const withPeer = runTool(["-h"], { PEER_PORT: "19999" });
  t.teardown(() => withPeer.kill());
  t.equal((await withPeer.exited).code, 0);
  t.match(withPeer.stdout(), /--peer-port Q .*\(default 19999, from PEER_PORT\)/);
});

t.test("a bad command line: one line on stderr, exit 2, nothing started", async (t) => {
  const port = await freePort();
  const cases: [string[], RegExp][] = [
    [["--bogus"], /Unknown option '--bogus'/],
    [["--nodes", "3", "--prot", "8080"], /Unknown option '--prot'/],
    [["extra"], /Unexpected argument 'extra'/],
    [["--port"], /--port/],
    [["--nodes", "0"], /--nodes: expected an integer from 1 to 64, got "0"/],
    [["--nodes", "2.5"], /--nodes: expected an integer/],
    [["--port", "65535", "--nodes", "2"], /--port: expected an integer from 1 to 65534/],
    [["--port", "65000"], /peer ports past 65535; set --peer-port/],
    [["--port", "20000", "--peer-port", "20001"], /overlap/],
    [["--host", ""], /--host: expected an address/],
  ];
  // All at once: each is a process start, and the machine may be busy.
  const tools = cases.map(([args]) => runTool(args, { PORT: String(port) }));
  for (const tool of tools) t.teardown(() => tool.kill());
  const exits = await Promise.all(tools.map((tool) => tool.exited));
  cases.forEach(([args, message], i) => {
    t.equal(exits[i]!.code, 2, `${args.join(" ")}: exit 2`);
    const lines = tools[i]!.output().trimEnd().split("\n");
    t.equal(lines.length, 1, `${args.join(" ")}: one line`);
    t.match(lines[0], message);
    t.match(lines[0], /^npm run cluster: .*\(usage: npm run cluster -- /);
  });
  t.notOk(await listening(port), "nothing listens");
  const badPeerPort = runTool(["--nodes", "1"], { PORT: String(port), PEER_PORT: "70000" });
  t.teardown(() => badPeerPort.kill());
  t.equal((await badPeerPort.exited).code, 2, "a bad PEER_PORT in the environment is refused too");
  t.match(badPeerPort.output(), /PEER_PORT: expected an integer/);
});

t.test("--port, --peer-port and --host place every node; SIGTERM to the tool stops them all", async (t) => {
  const port = await freePortRange(2);
  const peerPort = await freePortRange(2);
  const tool = runTool(["--nodes", "2", "--port", String(port), "--peer-port", String(peerPort), "--host", "127.0.0.1"]);
  t.teardown(() => tool.kill());
  const urls = [`http://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`];
  await until("both nodes ready", async () => (await ready(urls[0]!)) && (await ready(urls[1]!)), 60_000);
  const key = apiKey(tool);
  t.ok(key, "the tool prints the API key");
  const auth = { authorization: `Bearer ${key}` };
  await until("a ring of two", async () => (await request(urls[0] + "/cluster", { headers: auth })).json?.data?.members?.length === 2, 30_000);
  const cluster = (await request(urls[1] + "/cluster", { headers: auth })).json.data;
  t.same(
    cluster.members.map((m: { id: string; url: string }) => [m.id, m.url]).sort(),
    [
      [`127.0.0.1:${peerPort}`, urls[0]],
      [`127.0.0.1:${peerPort + 1}`, urls[1]],
    ],
    "members are named by their peer ports and listed at their HTTP URLs",
  );
  t.ok((await listening(peerPort)) && (await listening(peerPort + 1)), "both peer ports listen");
  const answer = await limit(urls[0]!, { namespace: "local-cluster", identifier: "u1", limit: 5, duration: 60 }, auth);
  t.equal(answer.status, 200);

  process.kill(tool.pid, "SIGTERM"); // the tool alone, as Ctrl-C in npm reaches it
  const { code } = await tool.exited;
  t.equal(code, 0, "the tool exits 0 once every node has drained");
  for (const p of [port, port + 1, peerPort, peerPort + 1]) t.notOk(await listening(p), `nothing listens on ${p} any more`);
});

t.test("PEER_PORT in the environment is the base of the peer ports", async (t) => {
  const port = await freePort();
  const peerPort = await freePort();
  const tool = runTool(["--nodes", "1"], { PORT: String(port), PEER_PORT: String(peerPort) });
  t.teardown(() => tool.kill());
  const url = `http://127.0.0.1:${port}`;
  await until("the node ready", () => ready(url), 60_000);
  const cluster = (await request(url + "/cluster", { headers: { authorization: `Bearer ${apiKey(tool)}` } })).json.data;
  t.same(cluster.members, [{ id: `127.0.0.1:${peerPort}`, url, policy_version: "none" }], "PORT and PEER_PORT are used, not overwritten");
  t.ok(await listening(peerPort));
  process.kill(tool.pid, "SIGINT");
  t.equal((await tool.exited).code, 0, "Ctrl-C stops it too");
});

t.test("a node that cannot start ends the cluster: the others stop, exit 1", async (t) => {
  const port = await freePortRange(2);
  // Another program on node 1's port: it accepts (the tool's look for an HTTP answer connects) and
  // reads, so a connection closed by the other side ends and close() below can finish.
  const taken = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => taken.listen(port + 1, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const peerPort = await freePortRange(2);
  const tool = runTool(["--nodes", "2", "--port", String(port), "--peer-port", String(peerPort)]);
  t.teardown(() => tool.kill());
  const { code } = await tool.exited;
  t.equal(code, 1);
  t.match(tool.output(), new RegExp(`node 1 \\(http://127\\.0\\.0\\.1:${port + 1}\\) exited with \\d+ before it listened; stopping the others`));
  t.notOk(await listening(port), "node 0 was stopped");
  t.notOk(await listening(peerPort), "and its peer port closed");
});

/** Starts the tool with three nodes on `port`.. and waits for all three ready in a ring of three. */
async function threeNodes(t: Test, port: number, args: string[], env: Record<string, string> = {}) {
  const tool = runTool(["--nodes", "3", "--port", String(port), ...args], env);
  t.teardown(() => tool.kill());
  const urls = [0, 1, 2].map((i) => `http://127.0.0.1:${port + i}`);
  await until("three nodes ready", async () => (await Promise.all(urls.map(ready))).every(Boolean), 60_000);
  const auth = { authorization: `Bearer ${apiKey(tool)}` };
  const ringOf = async (url: string) => (await request(url + "/cluster", { headers: auth })).json?.data?.members?.length;
  await until("a ring of three", async () => (await Promise.all(urls.map(ringOf))).every((n) => n === 3), 30_000);
  return { tool, urls, auth, ringOf };
}

t.test("--grpc-port gives each node a gRPC port; SIGUSR2 restarts one node while the others keep answering", async (t) => {
  const port = await freePortRange(3);
  const peerPort = await freePortRange(3);
  const grpcPort = await freePortRange(3);
  const { tool, urls, auth, ringOf } = await threeNodes(t, port, ["--peer-port", String(peerPort), "--grpc-port", String(grpcPort)]);
  for (let i = 0; i < 3; i++) t.ok(await listening(grpcPort + i), `node ${i} serves gRPC on ${grpcPort + i}`);
  t.match(tool.stdout(), new RegExp(`gRPC \\(Envoy's rate limit service\\): 127\\.0\\.0\\.1:${grpcPort}\\.\\.${grpcPort + 2}`));

  // Counted before the restart: the count survives it (node 0 drains and hands its states over).
  const body = { namespace: "local-cluster", identifier: "rolling", limit: 10, duration: 3600 };
  for (let i = 0; i < 3; i++) t.equal((await limit(urls[1]!, body, auth)).status, 200);

  process.kill(tool.pid, "SIGUSR2"); // the tool alone
  let others = 0;
  let othersDown = 0;
  await until(
    "node 0 started again and ready",
    async () => {
      for (const url of urls.slice(1)) {
        others++;
        if (!(await ready(url))) othersDown++;
      }
      return /node 0 \(.*\) stopped \(.*\); starting it again/.test(tool.stdout()) && (await ready(urls[0]!));
    },
    60_000,
  );
  t.match(tool.stdout(), /restarting node 0 \(http:\/\/127\.0\.0\.1:\d+\)/);
  t.equal(othersDown, 0, `nodes 1 and 2 answered /ready every time they were asked (${others} times) while node 0 restarted`);
  await until("a ring of three again", async () => (await Promise.all(urls.map(ringOf))).every((n) => n === 3), 30_000);
  t.ok(await listening(grpcPort), "node 0 serves gRPC again on its port");
  const after = await limit(urls[2]!, body, auth);
  t.equal(after.json.data.remaining, 6, "the fourth request of the key counts after the three before the restart");

  process.kill(tool.pid, "SIGTERM");
  t.equal((await tool.exited).code, 0, "the tool still stops every node, the restarted one included");
  for (let i = 0; i < 3; i++) t.notOk(await listening(port + i), `nothing listens on ${port + i} any more`);
});

t.test("a node killed while running: the others keep answering, the tool says how to start it, and starts it on request", async (t) => {
  const port = await freePortRange(3);
  const peerPort = await freePortRange(3);
  const { tool, urls, auth, ringOf } = await threeNodes(t, port, ["--peer-port", String(peerPort)], { LOG_LEVEL: "info" });

  // The tool's own poll may see the nodes later than this test did: until it has, a death reads
  // as a refused start (which stops the cluster).
  await until("the tool sees every node answer", async () => /all 3 nodes answer HTTP/.test(tool.stdout()), 60_000);
  const pid = Number(new RegExp(`node 1 \\(${urls[1]!.replace(/\./g, "\\.")}\\) started, pid (\\d+)`).exec(tool.stdout())?.[1]);
  t.ok(pid > 0, "the tool prints each node's pid");
  process.kill(pid, "SIGKILL"); // a real crash: no drain, no hand-off
  await until("the tool reports node 1's death", async () => /node 1 \(.*\) exited with SIGKILL; the others keep running/.test(tool.output()), 30_000);
  t.match(
    tool.output(),
    new RegExp(`Start it again: type \`1\` \\(or \`restart 1\`\\) and Enter here, or \`kill -USR2 ${tool.pid}\``),
    "with the command that starts it again",
  );
  for (const url of [urls[0]!, urls[2]!]) t.ok(await ready(url), `${url} still answers /ready`);
  await until("the survivors' ring drops node 1", async () => (await Promise.all([urls[0]!, urls[2]!].map(ringOf))).every((n) => n === 2), 30_000);
  const body = { namespace: "local-cluster", identifier: "survivor", limit: 10, duration: 3600 };
  t.equal((await limit(urls[0]!, body, auth)).status, 200, "the survivors decide");
  t.notOk(/stopping the others|notHandedOver/.test(tool.output()), "nothing stopped, no hand-off to a dead node");

  process.kill(tool.pid, "SIGUSR2"); // the tool alone: starts the stopped node
  await until("node 1 started again and ready", async () => /starting node 1 \(.*\) again/.test(tool.stdout()) && (await ready(urls[1]!)), 60_000);
  await until("a ring of three again", async () => (await Promise.all(urls.map(ringOf))).every((n) => n === 3), 30_000);

  process.kill(tool.pid, "SIGTERM");
  t.equal((await tool.exited).code, 0, "the tool stops every node, the started one included");
  for (let i = 0; i < 3; i++) t.notOk(await listening(port + i), `nothing listens on ${port + i} any more`);
});
