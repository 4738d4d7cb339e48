import { readFileSync } from "node:fs";
import { KNOWN_VARIABLES } from "./config.js";
import { RATELIMIT_IGNORED } from "./config/envoy-ratelimit.js";
import { PROTOCOL_MIN, PROTOCOL_VERSION } from "./peer/wire/constants.js";

/** The commands `ringlimit [command]` knows; no command starts a node. */
export const COMMANDS = Object.freeze({
  keygen: "print a new API key with its SHA-256 (for API_KEY_HASHES) and a new CLUSTER_SECRET",
});

/** `ringlimit --help`: usage, commands and every variable with its default, from config.ts's one list. */
export function usage(): string {
  const width = Math.max(...KNOWN_VARIABLES.map((v) => v.name.length));
  const lines = [
    `ringlimit ${version()}: a rate-limit check service (POST /limit), sharded over a ring of nodes`,
    "",
    "Usage:",
    ...[
      ["[--variable-name value]...", "start a node, configured by the environment; a flag overrides its variable"],
      ...Object.entries(COMMANDS),
      ["--help", "this text"],
      ["--version", "the version, the commit it was built from, and the peer protocol versions it speaks"],
    ].map(([form, what]) => `  ringlimit ${form!.padEnd(27)} ${what}`),
    "",
    "Environment variables (flag: --api-keys for API_KEYS, and so on):",
    ...KNOWN_VARIABLES.map((v) => `  ${v.name.padEnd(width)}  ${v.help}${v.default === "" ? "" : ` [default: ${v.default}]`}`),
    "",
    "Exit status: 0 after a clean stop (SIGTERM/SIGINT), 2 for a configuration error (one line naming the variable), 1 otherwise.",
    "Docs: docs/operations.md (running it), docs/api.md (the wire contract).",
  ];
  return lines.join("\n") + "\n";
}

let cachedVersion: string | undefined;
/** The version in package.json (dist/src/cli.js → ../../package.json). */
export function version(): string {
  cachedVersion ??= (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
  return cachedVersion;
}

/**
 * `ringlimit --version`: the build's version, then the peer protocol versions it speaks, the
 * figure that says whether two builds can share a ring (docs/operations.md, Rolling upgrades).
 */
export function versionLine(): string {
  return `${version()} (commit ${buildCommit()}, peer protocol ${PROTOCOL_MIN}..${PROTOCOL_VERSION})`;
}

let cachedCommit: string | undefined;
/**
 * The git commit this build was made from, written beside the compiled code at build time
 * (scripts/write-build-info.mjs); "unknown" when the build had none (no checkout, or a build
 * by plain tspc).
 */
export function buildCommit(): string {
  if (cachedCommit === undefined) {
    try {
      const info = JSON.parse(readFileSync(new URL("./build-info.json", import.meta.url), "utf8")) as { commit?: unknown };
      cachedCommit = typeof info.commit === "string" && /^[0-9a-f]{7,40}(-dirty)?$|^unknown$/i.test(info.commit) ? info.commit : "unknown";
    } catch {
      cachedCommit = "unknown";
    }
  }
  return cachedCommit;
}

const KNOWN_NAMES = new Set(KNOWN_VARIABLES.map((v) => v.name));
// Other programs' variables that sit within an edit or two of ours (OpenSSL's SSL_CERT_FILE
// is set in many images): never suspect.
// envoyproxy/ratelimit's variables that ringlimit knows and ignores (a deployment made for it sets them).
const FOREIGN = new Set([
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS",
  "NODE_OPTIONS",
  "NODE_ENV",
  "HOSTNAME",
  "HOME",
  "PATH",
  ...Object.keys(RATELIMIT_IGNORED),
]);
const PREFIX = "RINGLIMIT_";
// Kubernetes injects service links for a Service named ringlimit (RINGLIMIT_SERVICE_HOST,
// RINGLIMIT_PORT=tcp://…, RINGLIMIT_PORT_8080_TCP_ADDR, …): not ours, not misspellings.
// A bare `…_PORT` is a service link only with a tcp:// value: RINGLIMIT_PORT=8080 is a misspelt PORT.
const SERVICE_LINK = /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$|_PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?$/;
const SERVICE_LINK_PORT = /_PORT$/;
const SERVICE_LINK_URL = /^(tcp|udp|sctp):\/\//;

/**
 * Environment variables that look like one of ours but are not (`API_KEY`, `RINGLIMIT_PORT`,
 * `CLUSTER_SECRTE`): ringlimit ignores them, so the operator is told at start-up. A name
 * is suspect when it carries our prefix or is within a small edit distance of a known name
 * (one edit for names up to 5 characters, so HOME or PWD never match HOST or PORT).
 */
export function lookalikeVariables(env: NodeJS.ProcessEnv): { name: string; suggestion: string | undefined }[] {
  const found: { name: string; suggestion: string | undefined }[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (KNOWN_NAMES.has(name) || FOREIGN.has(name) || !/^[A-Z][A-Z0-9_]*$/i.test(name)) continue;
    const upper = name.toUpperCase();
    if (upper.startsWith(PREFIX)) {
      if (SERVICE_LINK.test(upper) || (SERVICE_LINK_PORT.test(upper) && SERVICE_LINK_URL.test(value ?? ""))) continue;
      const bare = upper.slice(PREFIX.length);
      found.push({ name, suggestion: KNOWN_NAMES.has(bare) ? bare : nearest(bare) });
      continue;
    }
    const suggestion = KNOWN_NAMES.has(upper) ? upper : nearest(upper);
    if (suggestion !== undefined) found.push({ name, suggestion });
  }
  return found;
}

// A name that differs from ours only by its unit or by a synonym of its last word is a
// lookalike however far apart the letters are (PEER_TIMEOUT, POLICY_FILE): an edit distance
// of 3 or 4 would also match unrelated names, so these forms are tried by rule first.
const UNIT_SUFFIXES = ["_MS", "_S", "_SECONDS", "_MILLIS", "_MILLISECONDS"];
const SYNONYMS: readonly [RegExp, string][] = [
  [/_(FILE|FILES|DIR|FOLDER)$/, "_PATH"],
  [/_(PATH|FILE|FOLDER)$/, "_DIR"],
  [/_(PATH|FILENAME)$/, "_FILE"],
];

function byRule(name: string): string | undefined {
  for (const unit of UNIT_SUFFIXES) {
    const bare = name.endsWith(unit) ? name.slice(0, -unit.length) : name;
    if (bare !== name && KNOWN_NAMES.has(bare + "_MS")) return bare + "_MS";
    if (bare === name && KNOWN_NAMES.has(name + "_MS")) return name + "_MS";
  }
  for (const [word, replacement] of SYNONYMS) {
    const candidate = name.replace(word, replacement);
    if (candidate !== name && KNOWN_NAMES.has(candidate)) return candidate;
  }
  return undefined;
}

function nearest(name: string): string | undefined {
  const ruled = byRule(name);
  if (ruled !== undefined) return ruled;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const known of KNOWN_NAMES) {
    const allowed = Math.min(name.length, known.length) <= 5 ? 1 : 2;
    const d = editDistance(name, known, allowed);
    if (d <= allowed && d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  return best;
}

/** Damerau–Levenshtein distance (adjacent swaps count one), or more than `limit` once it is exceeded. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
