import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { spawnProtected } from "../../harness/child-processes.js";
import type { FaultNet } from "./netns.js";

// The compiled test runs from dist/test/faults/net; the C source stays beside this file's source.
const SOURCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../test/faults/net/delayer.c");

/**
 * A slow link needs packet-level delay and loss. `tc netem` is missing on these kernels, so
 * an iptables NFQUEUE rule hands the link's packets to delayer.c, built here with gcc
 * against libnetfilter_queue (Debian `libnetfilter-queue-dev`). A TCP relay in JavaScript
 * was the alternative, but it sees a byte stream, not packets: it can delay, but it cannot
 * lose a segment and make TCP retransmit, which is what a lossy link does to the peer channel.
 */
export function buildDelayer(): { binary: string; remove(): void } | string {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-delayer-"));
  const binary = path.join(dir, "delayer");
  const r = spawnSync("gcc", ["-O2", "-o", binary, SOURCE, "-lnetfilter_queue"], { encoding: "utf8" });
  if (r.error !== undefined || r.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot build the NFQUEUE delayer (needs gcc and libnetfilter-queue-dev): ${(r.error?.message ?? r.stderr).split("\n")[0]}`;
  }
  return { binary, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface SlowLink {
  /** remove the rule first, then stop the delayer: held packets are released or dropped, never stuck */
  remove(): Promise<void>;
  stats(): string;
}

/**
 * Everything node `from` sends to node `to` waits `delayMs` and `lossPermille`/1000 of it is
 * lost, like `tc qdisc add dev eth0 root netem delay 150ms loss 5%` restricted to that peer:
 * one direction, so a forward's round trip grows by `delayMs` whichever side sent it.
 */
export async function slowLink(net: FaultNet, binary: string, from: number, to: number, delayMs: number, lossPermille: number): Promise<SlowLink> {
  const queue = String(10 + to);
  // Killed with the test process however that ends (harness/child-processes.ts).
  const child = spawnProtected(net.wrap(from)[0]!, [...net.wrap(from).slice(1), binary, queue, String(delayMs), String(lossPermille), "14"], {
    env: process.env,
  });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const kill = (signal: NodeJS.Signals) => child.signalGroup(signal);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    child.on("exit", (code) => reject(new Error(`delayer exited with ${code}: ${err}`)));
  });
  const rule = ["OUTPUT", "-d", net.nodes[to]!.ip, "-j", "NFQUEUE", "--queue-num", queue];
  net.exec(from, "iptables", ["-A", ...rule]);
  return {
    async remove() {
      try {
        net.exec(from, "iptables", ["-D", ...rule]);
      } catch {
        /* already flushed by heal() */
      }
      kill("SIGTERM");
      await exited;
    },
    stats: () => err.trim(),
  };
}
