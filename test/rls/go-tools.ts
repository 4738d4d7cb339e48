/**
 * Go programs the RLS tests drive the port with (h2spec, the grpc-go client): found on PATH
 * or built into a cache under the system's tmp with the module proxy, within a time bound.
 * Without Go, or when the proxy does not answer, the caller skips with the one line this
 * returns, so a machine without them runs the rest of the suite.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawnProtected } from "../harness/child-processes.js";

/** a go install or build downloads modules: minutes on a cold cache, seconds after */
const BUILD_TIMEOUT_MS = 300_000;

export const GO_CACHE = path.join(tmpdir(), "ringlimit-go-tools");

export type Built = { binary: string } | { skip: string };

/** Runs `go args` in `cwd` with GOBIN set to the cache; the output on failure, undefined on success. */
async function go(args: string[], cwd: string): Promise<string | undefined> {
  mkdirSync(GO_CACHE, { recursive: true });
  let child;
  try {
    child = spawnProtected("go", args, { env: { ...process.env, GOBIN: GO_CACHE, GOFLAGS: "-buildvcs=false" }, cwd });
  } catch (err) {
    return (err as Error).message;
  }
  let out = "";
  child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => child.signalGroup("SIGKILL"), BUILD_TIMEOUT_MS);
  try {
    const code = await child.closed;
    return code === 0 ? undefined : out.trim().split("\n").slice(-3).join(" | ") || `exit ${code}`;
  } catch (err) {
    return (err as Error).message; // ENOENT: no go on PATH
  } finally {
    clearTimeout(timer);
  }
}

/** `go install module@version` into the cache, unless the binary is there already. */
export async function goInstall(name: string, moduleAtVersion: string): Promise<Built> {
  const binary = path.join(GO_CACHE, name);
  if (existsSync(binary)) return { binary };
  const failed = await go(["install", moduleAtVersion], tmpdir());
  if (failed !== undefined) return { skip: `no ${name}: go install ${moduleAtVersion} failed (Go or its module proxy missing?): ${failed}` };
  return { binary };
}

/**
 * `go build` of the module in `dir` into the cache as `name`-<hash of its sources>. The cache is
 * the machine's, shared by every checkout on it: one name for all let a run from another
 * checkout replace the binary under a test that was using it (another version of the client).
 */
export async function goBuild(name: string, dir: string): Promise<Built> {
  const hash = createHash("sha256");
  for (const file of readdirSync(dir).sort()) if (/\.go$|^go\.(mod|sum)$/.test(file)) hash.update(file).update(readFileSync(path.join(dir, file)));
  const binary = path.join(GO_CACHE, `${name}-${hash.digest("hex").slice(0, 16)}`);
  if (existsSync(binary)) return { binary };
  // built aside and renamed: a run that finds the name finds a whole binary
  const partial = `${binary}.${process.pid}`;
  const failed = await go(["build", "-o", partial, "."], dir);
  if (failed !== undefined) return { skip: `no ${name}: go build in ${dir} failed (Go or its module proxy missing?): ${failed}` };
  renameSync(partial, binary);
  return { binary };
}
