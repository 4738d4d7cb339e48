// Manual benchmark (not part of `npm test`): decisions per second through one
// PeerClient → PeerServer pair on loopback, server in a child process so the
// two ends do not share a core. The handler is a trivial echo, so this
// measures the channel itself (framing, batching, handshake-free hot path).
//
//   npx tspc -p . && node dist/test/peer/peer-throughput.manual.js [seconds]
//
// Each row keeps `inflight` batches of `batch` decide() calls outstanding:
// a batch is issued in one turn (one DECIDE frame), the next when it is
// fully answered. CPU µs per decision is measured on each side.
//
// Measured (Node 20.20, 2 shared cores, loopback, 3 s per row, noisy box):
//   batch inflight  decisions/s  client µs  server µs
//       1        1       19,774      25.81      25.47   (one round trip per decision)
//       1       16      269,586       1.88       1.84
//      16        4      553,538       0.91       0.85
//      64        4    1,254,576       0.39       0.40
//     256        4    1,852,134       0.25       0.27
//    1024        2    1,828,798       0.25       0.29
//    4096        2    1,772,243       0.24       0.33
// Before the codec's ASCII fast path and plain byte loads/stores the 256-row
// was ~1.19 M/s at 0.46 µs client CPU. Per item, in isolation: DECIDE write
// 95 ns, decode 150 ns (most of it the identifier's UTF-8 decode), reply
// write 28 ns, read 27 ns. The rest is syscalls (writeBuffer ~15-20% of CPU).

import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { PeerClient, PeerServer, type DecideQuery, type DecideResult } from "../../src/peer/index.js";
import { spawnProtected } from "../harness/child-processes.js";
import { sleep } from "../harness/wait.js";
import { PEER_TIMINGS, decideQuery } from "./helpers.js";

// The server child inherits the parent's secret through its environment.
const SECRET = process.env.PEER_BENCH_SECRET ?? randomBytes(32).toString("base64url");

async function serve(): Promise<void> {
  const server = new PeerServer({
    host: "127.0.0.1",
    port: 0,
    secret: SECRET,
    nodeId: "bench-server",
    ...PEER_TIMINGS,
    handler: {
      decide({ limit }: DecideQuery, out: DecideResult): void {
        out.code = 0;
        out.remaining = limit - 1;
        out.resetTime = 1_700_000_000;
        out.retryAfterMs = 0;
      },
    },
  });
  const port = await server.listen();
  process.send!({ port });
  let cpu = process.cpuUsage();
  let items = 0;
  process.on("message", (m: string) => {
    if (m === "mark") {
      cpu = process.cpuUsage();
      items = server.stats.decideItems;
    } else if (m === "report") {
      const c = process.cpuUsage(cpu);
      process.send!({ cpuUs: c.user + c.system, items: server.stats.decideItems - items, frames: server.stats.decideFrames });
    } else if (m === "exit") {
      void server.close().then(() => process.exit(0));
    }
  });
}

interface ServerReport {
  cpuUs: number;
  items: number;
  frames: number;
}

async function run(seconds: number): Promise<void> {
  // fork(), in a process group killed with this one (harness/child-processes.ts).
  const child = spawnProtected(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--server"], {
    env: { ...process.env, PEER_BENCH_SECRET: SECRET },
    stdio: ["inherit", "inherit", "inherit", "ipc"],
  });
  const next = <T>(): Promise<T> => new Promise((r) => child.once("message", (m) => r(m as T)));
  const { port } = await next<{ port: number }>();
  const client = new PeerClient({
    host: "127.0.0.1",
    port,
    secret: SECRET,
    nodeId: "bench-client",
    serverNodeId: "bench-server",
    ...PEER_TIMINGS,
    timeoutMs: 1_000,
  });
  client.connect();
  await new Promise<void>((r) => client.once("up", () => r()));

  const ids = Array.from({ length: 10_000 }, (_, i) => `user-${i}-${(i * 2654435761) >>> 0}`);
  const rows: string[] = [];
  for (const [batch, inflight] of [
    [1, 1],
    [1, 16],
    [16, 4],
    [64, 4],
    [256, 4],
    [1024, 2],
    [4096, 2],
  ] as const) {
    let answered = 0;
    let errors = 0;
    let stop = false;
    let k = 0;
    let running = 0;
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    const issue = (): void => {
      if (stop) {
        if (--running === 0) done();
        return;
      }
      let left = batch;
      const cb = (err: unknown): void => {
        if (err !== null) errors++;
        answered++;
        if (--left === 0) setImmediate(issue); // next batch in a new turn
      };
      for (let i = 0; i < batch; i++) {
        client.decide(decideQuery("bench", ids[k++ % ids.length]!, 2, 100, 60), cb);
      }
    };
    // Warm up, then measure.
    running = inflight;
    for (let i = 0; i < inflight; i++) issue();
    await sleep(300);
    child.send("mark");
    const a0 = answered;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(seconds * 1000);
    const n = answered - a0;
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    child.send("report");
    const srv = await next<ServerReport>();
    stop = true;
    await finished;
    const perSec = (n / ms) * 1000;
    rows.push(
      [
        String(batch).padStart(6),
        String(inflight).padStart(8),
        Math.round(perSec).toLocaleString("en-US").padStart(12),
        ((cpu.user + cpu.system) / n).toFixed(2).padStart(10),
        (srv.cpuUs / srv.items).toFixed(2).padStart(10),
        String(errors).padStart(6),
      ].join(" "),
    );
  }
  console.log(" batch inflight  decisions/s  client µs  server µs  errors");
  for (const r of rows) console.log(r);
  client.close();
  child.send("exit");
}

if (process.argv.includes("--server")) void serve();
else void run(Number(process.argv[2] ?? 2));
