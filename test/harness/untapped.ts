/**
 * The processes a test starts run without tap's loader, as deployed ones do.
 *
 * tap runs each test file with its @tapjs/processinfo loader, and patches child_process so that
 * every process the file starts gets the loader too: an `--import` appended to NODE_OPTIONS and
 * _TAPJS_PROCESSINFO_* variables, written over the environment the caller passed. In a node the
 * loader turns source maps on and, as each module loads, parses its map and keeps it (our
 * compiled files all have one), which no deployed node does. An idle node's old space, read
 * after /ready: 40.6 MiB on Node 24 with the loader, 12.1 MiB without; 30.6 and 11.9 on Node 22.
 * small-heap-flood.process.test's node (64 MiB old space, 19.2 MiB of it for states) died of
 * heap exhaustion on Node 24 for those 28 MiB alone.
 *
 * The patch rewrites the environment after the caller's options are read, so nothing passed to
 * spawn can keep the loader out: the process starts through env(1) instead, which removes tap's
 * variables and sets NODE_OPTIONS back to the caller's (less tap's loader, should the caller
 * have passed process.env on), then execs the command (same pid).
 */
import { existsSync } from "node:fs";

/** coreutils' env, which every Debian and most Linux systems carry; without it tap's loader stays. */
const ENV = ["/usr/bin/env", "/bin/env"].find((f) => existsSync(f));

const TAP_VARIABLE = /^_TAPJS_PROCESSINFO_/;
/** `@tapjs/processinfo/import` (or `/loader`), or a path or file URL into that package. */
const TAP_LOADER = /(^|[=\\/])@tapjs[\\/]processinfo([\\/]|$)/;
const LOADER_FLAGS = ["--import", "--loader", "--experimental-loader"];

/** NODE_OPTIONS less tap's processinfo loader (`--import=…`, `--import …`, `--loader …`), every other token as it was. */
export function withoutTapLoader(nodeOptions: string): string {
  // Node splits NODE_OPTIONS on white space outside double quotes, in which \" is a quote (processinfo quotes every token).
  const tokens = (nodeOptions.match(/(?:"(?:[^"\\]|\\.)*"|[^\s"])+/g) ?? []).map((raw) => ({
    raw,
    bare: raw.replace(/"((?:[^"\\]|\\.)*)"/g, (_, inner: string) => inner.replace(/\\(.)/g, "$1")),
  }));
  const kept: typeof tokens = [];
  for (const token of tokens) {
    if (!TAP_LOADER.test(token.bare)) kept.push(token);
    else if (LOADER_FLAGS.includes(kept.at(-1)?.bare ?? "")) kept.pop(); // `--import <tap's loader>`: the flag goes too
  }
  return kept.map((t) => t.raw).join(" ");
}

/**
 * The argv to put before a command so that it runs with the environment `env` it was given,
 * tap's loader and variables taken out (empty without env(1)).
 */
export function untapped(env: NodeJS.ProcessEnv): string[] {
  if (ENV === undefined) return [];
  const tapVariables = new Set([...Object.keys(process.env), ...Object.keys(env)].filter((k) => TAP_VARIABLE.test(k)));
  const nodeOptions = withoutTapLoader(env.NODE_OPTIONS ?? "");
  return [ENV, "-u", "NODE_OPTIONS", ...[...tapVariables].flatMap((k) => ["-u", k]), ...(nodeOptions === "" ? [] : [`NODE_OPTIONS=${nodeOptions}`])];
}
