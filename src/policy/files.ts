import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync, statSync, type Stats } from "node:fs";
import path from "node:path";
import { PolicyError } from "./errors.js";

/** A policy file larger than this is refused: policies are text, and a reload reads it whole. */
export const MAX_POLICY_FILE_BYTES = 4 * 1024 * 1024;
/** All files of POLICY_PATH together. */
export const MAX_POLICY_BYTES = 16 * 1024 * 1024;

/** What POLICY_PATH names: one file, or a folder of them. Fixed at start-up (PolicyWatcher). */
export type PolicyKind = "file" | "folder";

/** One file of POLICY_PATH, read. */
export interface PolicyFile {
  /** the path to name in errors */
  readonly path: string;
  /** the file's name, as versions and override sources use it (the same on every member) */
  readonly name: string;
  readonly text: string;
}

const isPolicyName = (name: string) => !name.startsWith(".") && /\.ya?ml$/i.test(name);

/**
 * The files POLICY_PATH names: the file itself, or a folder's `*.yaml`/`*.yml` files in
 * name order. A folder's dot-entries are skipped (a Kubernetes ConfigMap's `..data` and
 * `..2026_…` folders), its symlinks followed (the ConfigMap's files are symlinks into
 * `..data`), its subfolders not entered. A file that vanishes between the listing and
 * the read is skipped (a ConfigMap key removed mid-swap); a file that is not regular
 * (FIFO, device, folder) or too large is refused. With `kind`, POLICY_PATH must still be
 * what it was at start-up: a file replaced by a folder (an empty one would be a policy
 * with no rule) or the other way round is refused.
 */
export function readPolicyFiles(policyPath: string, kind?: PolicyKind): PolicyFile[] {
  const top = statOrFail(policyPath);
  const now: PolicyKind = top.isDirectory() ? "folder" : "file";
  if (kind !== undefined && now !== kind) {
    throw new PolicyError(policyPath, `was a ${kind} at start-up and is now a ${now}: a change of kind is refused (restart the node to make it)`);
  }
  if (now === "file") {
    const text = readBounded(policyPath);
    if (text === undefined) throw new PolicyError(policyPath, "does not exist");
    return [{ path: policyPath, name: path.basename(policyPath), text }];
  }
  const files: PolicyFile[] = [];
  let total = 0;
  for (const name of listPolicyNames(policyPath)) {
    const file = path.join(policyPath, name);
    const text = readBounded(file);
    if (text === undefined) continue;
    total += Buffer.byteLength(text);
    if (total > MAX_POLICY_BYTES) throw new PolicyError(file, `the policy files add up to more than ${MAX_POLICY_BYTES} bytes`);
    files.push({ path: file, name, text });
  }
  return files;
}

/** The kind of POLICY_PATH now; undefined when it cannot be stat'ed. */
export function kindOf(policyPath: string): PolicyKind | undefined {
  try {
    return statSync(policyPath).isDirectory() ? "folder" : "file";
  } catch {
    return undefined;
  }
}

function listPolicyNames(folder: string): string[] {
  try {
    return readdirSync(folder).filter(isPolicyName).sort();
  } catch (err) {
    throw new PolicyError(folder, `cannot list the folder (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`);
  }
}

function statOrFail(file: string): Stats {
  try {
    return statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PolicyError(file, code === "ENOENT" ? "does not exist" : `cannot read (${code ?? "unreadable"})`);
  }
}

/**
 * A file's text, read without ever blocking: opened non-blocking (a FIFO without a writer
 * opens at once), checked to be a regular file of at most MAX_POLICY_FILE_BYTES on the
 * open descriptor, read to its end but never past the bound. Undefined when it does not
 * exist (any more).
 */
function readBounded(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    throw new PolicyError(file, `cannot read (${code ?? "unreadable"})`);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new PolicyError(file, `is not a regular file (${describe(stats)}); a policy file must be one`);
    if (stats.size > MAX_POLICY_FILE_BYTES) throw new PolicyError(file, `is ${stats.size} bytes, over the ${MAX_POLICY_FILE_BYTES} a policy file may have`);
    // One byte more than allowed tells a file that grew past the bound since fstat.
    const buffer = Buffer.allocUnsafe(Math.min(stats.size + 1, MAX_POLICY_FILE_BYTES + 1));
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
      if (length === buffer.length) {
        if (length > MAX_POLICY_FILE_BYTES) throw new PolicyError(file, `is over the ${MAX_POLICY_FILE_BYTES} bytes a policy file may have`);
        break;
      }
    }
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(buffer.subarray(0, length));
    } catch {
      throw new PolicyError(file, "is not UTF-8 text");
    }
  } finally {
    closeSync(fd);
  }
}

function describe(stats: Stats): string {
  if (stats.isDirectory()) return "a folder";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return "a device";
  if (stats.isSocket()) return "a socket";
  return "not a file";
}

/** The policy's version: a short SHA-256 of every file's name and text, in name order. */
export function versionOf(files: readonly PolicyFile[]): string {
  const hash = createHash("sha256");
  for (const file of [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    hash.update(`${file.name.length}:${file.name}${Buffer.byteLength(file.text)}:`);
    hash.update(file.text);
  }
  return hash.digest("hex").slice(0, 12);
}

/**
 * What the files under POLICY_PATH look like to stat, cheaply: names, inodes, sizes and
 * change times, symlinks followed. Unchanged means nothing to reload (a ConfigMap swap
 * changes the inodes behind the names). Never throws: a problem is part of the answer.
 */
export function fingerprintOf(policyPath: string): string {
  const parts: string[] = [];
  const add = (name: string, file: string) => {
    try {
      const s = statSync(file);
      parts.push(`${name}:${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}:${s.mode}`);
    } catch (err) {
      parts.push(`${name}:${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  };
  add("", policyPath);
  try {
    if (statSync(policyPath).isDirectory()) for (const name of readdirSync(policyPath).filter(isPolicyName).sort()) add(name, path.join(policyPath, name));
  } catch {
    // already in the answer through add("")
  }
  return parts.join("\n");
}
