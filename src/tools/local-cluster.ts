#!/usr/bin/env node
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { generateClusterSecret } from "../config.js";
import { generateApiKey } from "../http/auth.js";

/**
 * `npm run cluster -- --nodes 3 [--port 8080]`: a local cluster on loopback for trying
 * ringlimit out. Node i listens on HTTP port + i and peer port + 1000 + i; all share one
 * generated API key and cluster secret. Ctrl-C stops them all (SIGTERM, graceful).
 */
const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`${name}: expected a positive integer\n`);
    process.exit(2);
  }
  return value;
};
const count = flag("--nodes", 3);
const basePort = flag("--port", 8080);
const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../main.js");
const { key } = generateApiKey();
const secret = generateClusterSecret();
const peers = Array.from({ length: count }, (_, i) => `127.0.0.1:${basePort + 1000 + i}`).join(",");

const children: ChildProcess[] = [];
for (let i = 0; i < count; i++) {
  const child = spawn(process.execPath, [main], {
    stdio: ["ignore", "inherit", "inherit"],
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(basePort + i),
      PEER_HOST: "127.0.0.1",
      PEER_PORT: String(basePort + 1000 + i),
      PEERS: peers,
      CLUSTER_SECRET: secret,
      API_KEYS: key,
      LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
    },
  });
  children.push(child);
}

process.stdout.write(
  `ringlimit local cluster: ${count} nodes on http://127.0.0.1:${basePort}..${basePort + count - 1} (peers ${peers})\n` +
    `API key: ${key}\n` +
    `try: curl -s -X POST http://127.0.0.1:${basePort}/limit -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '{"namespace":"demo","identifier":"user-1","limit":5,"duration":60}'\n`,
);

let exited = 0;
for (const child of children) {
  child.on("exit", () => {
    if (++exited === children.length) process.exit(0);
  });
}
const stop = () => {
  for (const child of children) child.kill("SIGTERM");
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
