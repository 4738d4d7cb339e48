/**
 * test/harness/ports.ts: no two test processes are handed the same port, even when they ask
 * at the same moment starting from the same place, and a port handed out is one our node can
 * bind but no other claimer can take.
 */
import dgram from "node:dgram";
import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { spawnProtected } from "./child-processes.js";
import { freePort, freePortRange } from "./ports.js";

const CLAIMER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/claim-ports.js");

/** Start a claimer pinned to the span's first port; resolve with the ports it holds (it keeps them until killed). */
function claimer(t: Test, count: number, mode: "single" | "range"): Promise<number[]> {
  const child = spawnProtected(process.execPath, [CLAIMER, String(count), mode], {
    env: { ...process.env, TEST_PORTS_START: "0" },
    stdio: ["pipe", "pipe", "inherit"],
  });
  t.teardown(() => child.signalGroup("SIGKILL"));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("\n")) resolve(JSON.parse(out) as number[]);
    });
    child.on("exit", (code) => reject(new Error(`claimer exited with ${code} before printing its ports`)));
  });
}

const bindUdp = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = dgram.createSocket("udp4");
    s.once("error", () => resolve(false));
    s.bind(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });

const listenTcp = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });

t.test("three processes claiming at once from the same start get disjoint ports", async (t) => {
  const [a, b, c] = await Promise.all([claimer(t, 60, "single"), claimer(t, 60, "single"), claimer(t, 30, "range")]);
  const all = [...a!, ...b!, ...c!];
  t.equal(all.length, 180);
  t.equal(new Set(all).size, all.length, "no port was handed to two processes");
  for (let i = 0; i < c!.length; i += 2) t.equal(c![i + 1], c![i]! + 1, "a range is consecutive");
});

t.test("a port handed out is below the ephemeral range, bindable over TCP, and claimed", async (t) => {
  const port = await freePort();
  const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  t.ok(port < low, `${port} is below the ephemeral range (from ${low}), where listen(0) never lands`);
  t.notOk(await bindUdp(port), "its number is held: a second claim fails in the kernel");
  t.ok(await listenTcp(port), "and the node it is for can listen on it");
  t.not(await freePort(), port, "the same process is not handed it twice");
});

t.test("a port something already listens on is never handed out", async (t) => {
  // Occupy the next candidates of a range without claiming them, as a foreign program would.
  const first = await freePortRange(2);
  const foreign = net.createServer();
  await new Promise<void>((resolve) => foreign.listen({ port: first + 2, host: "127.0.0.1", exclusive: true }, resolve));
  t.teardown(() => foreign.close());
  const next = await freePort();
  t.not(next, first + 2, "the listened port was skipped");
  t.equal(next, first + 3, "and the one after it taken");
});
