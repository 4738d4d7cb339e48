#!/usr/bin/env node
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { generateClusterSecret } from "../peer/link/cluster-secret.js";
import { generateApiKey } from "../auth/api-keys.js";

/**
 * `npm run cluster -- [--nodes 3] [--port 8080] [--peer-port 9080] [--grpc-port G] [--host 127.0.0.1]`:
 * a local cluster for trying ringlimit out. Node i listens on HTTP port + i, on peer port + i
 * and, with --grpc-port, on gRPC port G + i; all share one generated API key and cluster
 * secret. PORT, PEER_PORT, GRPC_PORT and HOST in the environment are the defaults of the flags;
 * every other variable reaches every node as it is. Ctrl-C stops them all (SIGTERM: each
 * drains and hands its states over). A node that dies (killed, crashed) leaves the others
 * running, and the tool prints how to start it again; one that refuses its configuration
 * (exit 2) stops them all. Typing `N` (or `restart N`) on the tool's input starts node N again
 * when it is stopped, or restarts it while the others run (a rolling restart); SIGUSR2 to the
 * tool starts every stopped node, or, when none is, restarts the next node in turn (0, 1, ...).
 */

const USAGE = "npm run cluster -- [--nodes N] [--port P] [--peer-port Q] [--grpc-port G] [--host H] [--help]";
const MAX_NODES = 64;
/** How often the tool looks whether a node it started listens yet. */
const LISTEN_POLL_MS = 250;

/** A bad command line: one line on stderr, exit 2, nothing started. */
function refuse(message: string): never {
  process.stderr.write(`npm run cluster: ${message} (usage: ${USAGE})\n`);
  process.exit(2);
}

let parsed: ReturnType<typeof parseOptions>;
function parseOptions() {
  return parseArgs({
    args: process.argv.slice(2),
    strict: true,
    allowPositionals: false,
    options: {
      nodes: { type: "string" },
      port: { type: "string" },
      "peer-port": { type: "string" },
      "grpc-port": { type: "string" },
      host: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}
try {
  parsed = parseOptions();
} catch (err) {
  // parseArgs says which option is unknown or lacks its value; keep its first line only.
  refuse((err as Error).message.split("\n")[0]!.replace(/\. To specify a positional.*$/, ""));
}
const options = parsed.values;

function integer(name: string, raw: string, min: number, max: number): number {
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) refuse(`${name}: expected an integer from ${min} to ${max}, got "${raw}"`);
  return value;
}

const env = process.env;
const portDefault = env.PORT ?? "8080";
const hostDefault = env.HOST ?? "127.0.0.1";

if (options.help) {
  const peerDefault = env.PEER_PORT !== undefined ? `${env.PEER_PORT}, from PEER_PORT` : "--port + 1000";
  const grpcDefault = env.GRPC_PORT !== undefined ? `${env.GRPC_PORT}, from GRPC_PORT` : "none: no gRPC port";
  process.stdout.write(
    `Usage: ${USAGE}\n\n` +
      "Starts a local ringlimit cluster: N nodes that share one generated API key and cluster\n" +
      "secret. Ctrl-C stops them all (each drains and hands its states over).\n\n" +
      "Options:\n" +
      `  --nodes N       number of nodes, 1 to ${MAX_NODES} (default 3)\n` +
      `  --port P        HTTP port of the first node; node i listens on P + i (default ${portDefault}${env.PORT !== undefined ? ", from PORT" : ""})\n` +
      `  --peer-port Q   peer port of the first node; node i listens on Q + i (default ${peerDefault})\n` +
      `  --grpc-port G   gRPC port (Envoy's rate limit service) of the first node; node i listens on G + i (default ${grpcDefault})\n` +
      `  --host H        address every listener binds (default ${hostDefault}${env.HOST !== undefined ? ", from HOST" : ""})\n` +
      "  -h, --help      print this and exit, starting nothing\n\n" +
      "While it runs, `N` (or `restart N`) and Enter on its input stops node N (it drains and hands\n" +
      "its states over) and starts it again, the others running: a rolling restart. A node that dies\n" +
      "leaves the others running; `N` starts it again, and so does SIGUSR2 to the tool (every stopped\n" +
      "node; with none stopped, SIGUSR2 restarts the next node in turn). A node that refuses its\n" +
      "configuration (exit 2) stops the cluster.\n\n" +
      "Every other variable in the environment (LOG_LEVEL, MAX_KEYS, ...) reaches every node;\n" +
      "`node dist/src/main.js --help` lists them.\n",
  );
  process.exit(0);
}

const count = integer("--nodes", options.nodes ?? "3", 1, MAX_NODES);
const port = integer(options.port !== undefined ? "--port" : "PORT", options.port ?? portDefault, 1, 65535 - count + 1);
const peerRaw = options["peer-port"] ?? env.PEER_PORT;
const peerName = options["peer-port"] !== undefined ? "--peer-port" : "PEER_PORT";
const peerPort = peerRaw !== undefined ? integer(peerName, peerRaw, 1, 65535 - count + 1) : port + 1000;
if (peerPort + count - 1 > 65535) refuse(`--port ${port} + 1000 puts peer ports past 65535; set --peer-port`);
if (peerPort < port + count && port < peerPort + count) {
  refuse(`HTTP ports ${port}-${port + count - 1} and peer ports ${peerPort}-${peerPort + count - 1} overlap`);
}
const grpcRaw = options["grpc-port"] ?? env.GRPC_PORT;
const grpcName = options["grpc-port"] !== undefined ? "--grpc-port" : "GRPC_PORT";
const grpcPort = grpcRaw !== undefined ? integer(grpcName, grpcRaw, 1, 65535 - count + 1) : undefined;
const overlaps = (a: number, b: number) => a < b + count && b < a + count;
if (grpcPort !== undefined && (overlaps(grpcPort, port) || overlaps(grpcPort, peerPort))) {
  refuse(`gRPC ports ${grpcPort}-${grpcPort + count - 1} overlap the HTTP or peer ports`);
}
const host = options.host ?? hostDefault;
if (host === "" || /\s/.test(host)) refuse(`--host: expected an address, got "${host}"`);

// Where the members (and a caller on this machine) reach a node: a wildcard bind address is
// no destination, so its loopback stands in; an IPv6 literal is bracketed in host:port.
const reach = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
const hostPort = (p: number) => (reach.includes(":") ? `[${reach}]:${p}` : `${reach}:${p}`);
const ids = Array.from({ length: count }, (_, i) => hostPort(peerPort + i));
const urls = Array.from({ length: count }, (_, i) => `http://${hostPort(port + i)}`);

const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../main.js");
const { key } = generateApiKey();
const secret = generateClusterSecret();

const children: ChildProcess[] = [];
/** nodes being restarted: their exit is expected, and they are started again */
const restarting = new Set<number>();
let stopping = false;
let failed = false;
const running = (child: ChildProcess | undefined) => child !== undefined && child.exitCode === null && child.signalCode === null;
const stop = () => {
  stopping = true;
  for (const child of children) if (running(child)) child.kill("SIGTERM");
  // Every node already gone (each died and none was started again): no exit event is coming.
  if (!children.some(running)) process.exit(failed ? 1 : 0);
};

/** per node: whether its current process has accepted a connection on its HTTP port */
const everListened: boolean[] = [];
/** every node listened once: from then on a node that dies leaves the others running */
let started = false;

/**
 * Mark node i listening once its HTTP port answers HTTP (any status: /ready says 503 until the
 * ring forms). An answer, not a TCP accept: another program holding the port accepts too.
 */
function watchListening(i: number, child: ChildProcess): void {
  const tls = env.TLS_CERT_FILE !== undefined && env.TLS_CERT_FILE !== "";
  const attempt = () => {
    if (children[i] !== child || !running(child)) return;
    // The node's own certificate is whatever the operator gave it: only its answering matters here.
    const req = (tls ? httpsGet : httpGet)(
      { host: reach, port: port + i, path: "/ready", timeout: 2000, ...(tls ? { rejectUnauthorized: false } : {}) },
      (res) => {
        res.resume();
        everListened[i] = true;
        if (!started && everListened.length === count && everListened.every(Boolean)) {
          // From here a node that exits is a death the others outlive, not a refused start.
          started = true;
          process.stdout.write(`npm run cluster: all ${count} nodes answer HTTP\n`);
        }
      },
    );
    req.once("timeout", () => req.destroy());
    req.once("error", () => setTimeout(attempt, LISTEN_POLL_MS).unref());
  };
  attempt();
}

function startNode(i: number): void {
  const child = spawn(process.execPath, [main], {
    stdio: ["ignore", "inherit", "inherit"],
    env: {
      ...env,
      HOST: host,
      PORT: String(port + i),
      PEER_HOST: host,
      PEER_PORT: String(peerPort + i),
      ...(grpcPort !== undefined ? { GRPC_PORT: String(grpcPort + i) } : {}),
      PEERS: ids.join(","),
      NODE_ID: ids[i],
      ADVERTISE_URL: urls[i],
      CLUSTER_SECRET: secret,
      API_KEYS: key,
      LOG_LEVEL: env.LOG_LEVEL ?? "info",
    },
  });
  children[i] = child;
  process.stdout.write(`npm run cluster: node ${i} (${urls[i]}) started, pid ${child.pid}\n`);
  everListened[i] = false;
  watchListening(i, child);
  child.on("exit", (code, signal) => {
    if (restarting.delete(i) && !stopping) {
      process.stdout.write(`npm run cluster: node ${i} (${urls[i]}) stopped (${signal ?? code}); starting it again\n`);
      return startNode(i);
    }
    if (!stopping) {
      if (!everListened[i] && !started) {
        // A node that never listened refused its configuration (a port taken, a bad variable):
        // the cluster is stopped and the tool exits non-zero, rather than leave a partial ring.
        failed = true;
        process.stderr.write(`npm run cluster: node ${i} (${urls[i]}) exited with ${signal ?? code} before it listened; stopping the others\n`);
        stop();
      } else {
        // A node that dies once running (a crash, a kill) is what a cluster is for: the others
        // keep answering and take its keys over; stopping them would hand states to nobody.
        process.stderr.write(
          `npm run cluster: node ${i} (${urls[i]}) exited with ${signal ?? code}; the others keep running. ` +
            `Start it again: type \`${i}\` (or \`restart ${i}\`) and Enter here, or \`kill -USR2 ${process.pid}\` (starts every stopped node)\n`,
        );
      }
    }
    if (children.every((c) => !running(c)) && (stopping || failed)) process.exit(failed ? 1 : 0);
  });
}

/**
 * Stop node i (SIGTERM: it drains and hands its states over, as a pod being replaced does)
 * and start it again on the same ports once it has exited; the other nodes keep running.
 */
function restart(i: number): void {
  if (stopping) return;
  if (!Number.isSafeInteger(i) || i < 0 || i >= count) {
    process.stderr.write(`npm run cluster: no node ${i}: nodes are 0 to ${count - 1}\n`);
    return;
  }
  if (restarting.has(i)) return;
  if (!running(children[i])) {
    process.stdout.write(`npm run cluster: starting node ${i} (${urls[i]}) again\n`);
    return startNode(i);
  }
  restarting.add(i);
  process.stdout.write(`npm run cluster: restarting node ${i} (${urls[i]})\n`);
  children[i]!.kill("SIGTERM");
}

for (let i = 0; i < count; i++) startNode(i);
let nextRestart = 0;
// SIGUSR2: every stopped node starts again; when none is stopped, the next node in turn restarts.
process.on("SIGUSR2", () => {
  const stopped = children.flatMap((c, i) => (running(c) || restarting.has(i) ? [] : [i]));
  if (stopped.length > 0) for (const i of stopped) restart(i);
  else restart(nextRestart++ % count);
});
// `N`, `restart N` or `r N` on the tool's input; anything else is answered with what it takes.
createInterface({ input: process.stdin }).on("line", (line) => {
  const m = /^\s*(?:(?:restart|r)\s+)?(\d+)\s*$/.exec(line);
  if (m !== null) restart(Number(m[1]));
  else if (line.trim() !== "") process.stderr.write(`npm run cluster: commands: N or restart N (N from 0 to ${count - 1}); Ctrl-C stops every node\n`);
});

process.stdout.write(
  `ringlimit local cluster: ${count} nodes on ${urls[0]}..${port + count - 1} (peers ${ids.join(",")})\n` +
    (grpcPort !== undefined ? `gRPC (Envoy's rate limit service): ${reach}:${grpcPort}..${grpcPort + count - 1}\n` : "") +
    `API key: ${key}\n` +
    `restart one node, the others running: type \`N\` (or \`restart N\`) and Enter here, or \`kill -USR2 ${process.pid}\` (the stopped nodes, else the next node in turn)\n` +
    `try: curl -s -X POST ${urls[0]}/limit -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '{"namespace":"demo","identifier":"user-1","limit":5,"duration":60}'\n`,
);

process.on("SIGINT", stop);
process.on("SIGTERM", stop);
