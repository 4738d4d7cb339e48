import { execFileSync, spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";

/**
 * A private network for the fault suite: one Linux network namespace per node, each
 * joined by a veth pair to a bridge in this (the test's) namespace, where the client runs.
 *
 *   client 10.a.b.254 ── bridge ──┬── veth ── ns n1: 10.a.b.1
 *                                 ├── veth ── ns n2: 10.a.b.2
 *                                 └── veth ── ns n3: 10.a.b.3
 *
 * Faults are iptables rules inside the node namespaces, so they vanish with them and never
 * touch this namespace's tables. A partition drops packets on arrival (INPUT), the way a
 * broken link loses them; dropping in OUTPUT would instead fail the sender's writes at once
 * with EPERM, which no real partition does. The client is never cut off: clients still
 * reach every node, as they do when the network between nodes breaks.
 *
 * Names carry this process's pid (`rlf-<pid>-n1`, `rlf<pid>b`, `rlf<pid>v1`), so runs in
 * parallel do not collide and a later run can remove what a killed run left behind.
 */
export interface FaultNet {
  readonly nodes: readonly { readonly ns: string; readonly ip: string }[];
  readonly clientIp: string;
  /** run a command inside node i's namespace; throws with its stderr on failure */
  exec(i: number, command: string, args: readonly string[]): string;
  /** the argv prefix that runs a program inside node i's namespace */
  wrap(i: number): string[];
  /** node i stops receiving packets from node j (j still receives i's) */
  dropFrom(i: number, j: number): void;
  /** node i and every other node lose each other's packets, both ways */
  isolate(i: number): void;
  /** remove every fault rule in every namespace */
  heal(): void;
  /** remove the namespaces, veths and bridge; safe to call twice, synchronous so exit handlers can use it */
  destroy(): void;
}

const IP = "ip";
const IPTABLES = "iptables";
const PREFIX = "rlf";

function run(command: string, args: readonly string[]): string {
  const r = spawnSync(command, args, { encoding: "utf8", timeout: 10_000 });
  if (r.error !== undefined) throw r.error;
  if (r.status !== 0) throw new Error(`${command} ${args.join(" ")}: exit ${r.status}: ${r.stderr.trim()}`);
  return r.stdout;
}

function quiet(command: string, args: readonly string[]): void {
  spawnSync(command, args, { stdio: "ignore", timeout: 10_000 });
}

/** Why the suite cannot run here, or undefined when it can. */
export function faultSupport(): string | undefined {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "not root";
  for (const [tool, args] of [
    [IP, ["-V"]],
    [IPTABLES, ["-V"]],
  ] as const) {
    const r = spawnSync(tool, args, { stdio: "ignore" });
    if (r.error !== undefined || r.status !== 0) return `\`${tool}\` not available`;
  }
  const probe = `${PREFIX}-${process.pid}-probe`;
  try {
    run(IP, ["netns", "add", probe]);
    run(IP, ["netns", "exec", probe, IPTABLES, "-S"]);
    return undefined;
  } catch (err) {
    return `network namespaces or iptables not usable: ${(err as Error).message.split("\n")[0]}`;
  } finally {
    quiet(IP, ["netns", "del", probe]);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Remove namespaces and links left by runs whose process is gone (a SIGKILLed test cannot clean up). */
function removeLeftovers(): void {
  for (const line of run(IP, ["netns", "list"]).split("\n")) {
    const m = /^(rlf-(\d+)-\w+)/.exec(line);
    if (m && !alive(Number(m[2]))) quiet(IP, ["netns", "del", m[1]!]);
  }
  for (const line of run(IP, ["-o", "link", "show"]).split("\n")) {
    const m = /^\d+: (rlf(\d+)(?:b|v\d+))[@:]/.exec(line);
    if (m && !alive(Number(m[2]))) quiet(IP, ["link", "del", m[1]!]);
  }
}

/** A /24 in 10.64.0.0/10 that no address or route here uses. */
function freeSubnet(): string {
  const taken = run(IP, ["-4", "-o", "addr", "show"]) + run(IP, ["-4", "route", "show", "table", "all"]);
  for (;;) {
    const subnet = `10.${randomInt(64, 128)}.${randomInt(0, 256)}`;
    if (!taken.includes(subnet + ".")) return subnet;
  }
}

const live = new Set<FaultNet>();
function destroyAll(): void {
  for (const net of live) net.destroy();
}
// A failing or interrupted test still leaves nothing behind.
process.on("exit", destroyAll);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    destroyAll();
    process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1));
  });
}

export function createFaultNet(size: number): FaultNet {
  removeLeftovers();
  const tag = `${PREFIX}${process.pid}`;
  const bridge = `${tag}b`;
  const subnet = freeSubnet();
  const nodes = Array.from({ length: size }, (_, i) => ({
    ns: `${PREFIX}-${process.pid}-n${i + 1}-${randomInt(1e6)}`,
    ip: `${subnet}.${i + 1}`,
    veth: `${tag}v${i + 1}`,
  }));
  let destroyed = false;

  const net: FaultNet = {
    nodes,
    clientIp: `${subnet}.254`,
    exec(i, command, args) {
      return run(IP, ["netns", "exec", nodes[i]!.ns, command, ...args]);
    },
    wrap(i) {
      return [IP, "netns", "exec", nodes[i]!.ns];
    },
    dropFrom(i, j) {
      net.exec(i, IPTABLES, ["-A", "INPUT", "-s", nodes[j]!.ip, "-j", "DROP"]);
    },
    isolate(i) {
      for (let j = 0; j < nodes.length; j++) {
        if (j === i) continue;
        net.dropFrom(i, j);
        net.dropFrom(j, i);
      }
    },
    heal() {
      for (let i = 0; i < nodes.length; i++) for (const chain of ["INPUT", "OUTPUT"]) net.exec(i, IPTABLES, ["-F", chain]);
    },
    destroy() {
      if (destroyed) return;
      destroyed = true;
      live.delete(net);
      // Deleting a namespace deletes its iptables rules and its end of the veth (and so the pair).
      for (const n of nodes) quiet(IP, ["netns", "del", n.ns]);
      for (const n of nodes) quiet(IP, ["link", "del", n.veth]);
      quiet(IP, ["link", "del", bridge]);
    },
  };
  live.add(net);
  try {
    run(IP, ["link", "add", bridge, "type", "bridge"]);
    run(IP, ["addr", "add", `${net.clientIp}/24`, "dev", bridge]);
    run(IP, ["link", "set", bridge, "up"]);
    for (const n of nodes) {
      run(IP, ["netns", "add", n.ns]);
      run(IP, ["link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns]);
      run(IP, ["link", "set", n.veth, "master", bridge, "up"]);
      run(IP, ["-n", n.ns, "addr", "add", `${n.ip}/24`, "dev", "eth0"]);
      run(IP, ["-n", n.ns, "link", "set", "eth0", "up"]);
      run(IP, ["-n", n.ns, "link", "set", "lo", "up"]);
    }
  } catch (err) {
    net.destroy();
    throw err;
  }
  return net;
}

/** Whether anything of `net` is still present (the suite asserts it is all gone). */
export function leftovers(tagPid = process.pid): string[] {
  const found: string[] = [];
  for (const line of execFileSync(IP, ["netns", "list"], { encoding: "utf8" }).split("\n"))
    if (line.startsWith(`${PREFIX}-${tagPid}-`)) found.push(line.split(" ")[0]!);
  for (const line of execFileSync(IP, ["-o", "link", "show"], { encoding: "utf8" }).split("\n")) {
    const m = /^\d+: ([^@:]+)/.exec(line);
    if (m && m[1]!.startsWith(`${PREFIX}${tagPid}`) && /^rlf\d+(b|v\d+)$/.test(m[1]!)) found.push(m[1]!);
  }
  return found;
}
