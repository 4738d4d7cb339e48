import { statSync, watch, type FSWatcher } from "node:fs";
import path from "node:path";
import type { Logger } from "../logger.js";
import type { PolicyMetrics } from "../metrics/policy-metrics.js";
import { PolicyError } from "./errors.js";
import { fingerprintOf, kindOf, readPolicyFiles, versionOf, type PolicyKind } from "./files.js";
import { compileOffLoop, warmCompiler } from "./worker/off-loop.js";
import type { Policy } from "./types.js";

/** How often POLICY_PATH is stat'ed for a change fs.watch may have missed (a ConfigMap's symlink swap). */
export const POLICY_CHECK_INTERVAL_MS = 1000;
/** fs.watch events come in bursts (an editor's write, a swap's renames): read once they settle. */
const SETTLE_MS = 50;

export interface PolicyWatcherOptions {
  /** POLICY_PATH: a file or a folder */
  readonly path: string;
  /** the policy loaded from it at start-up (loadPolicy) */
  readonly initial: Policy;
  /** called with each new policy; the owner swaps it in with one assignment */
  readonly onChange: (policy: Policy) => void;
  readonly logger?: Logger;
  readonly metrics?: PolicyMetrics;
  /** default POLICY_CHECK_INTERVAL_MS */
  readonly intervalMs?: number;
}

export type ReloadResult = "unchanged" | "reloaded" | "refused";

/**
 * Keeps the policy in step with POLICY_PATH: fs.watch on its folder (the file's folder
 * when it names a file) for a prompt reload, and a stat of every file each interval for
 * what fs.watch misses. A change is read whole and compiled in a worker, under a time and
 * heap budget (off-loop.ts), one compile at a time; the new policy is handed to onChange
 * only when its version (content hash) differs. POLICY_PATH stays the kind (file or
 * folder) it was when the watcher was made: a change of kind is refused. A policy that does not load is
 * logged once (one line), counted, and kept out: the last good one stays in force until
 * the files change again. Two timers for the whole process, both unref'd.
 */
export class PolicyWatcher {
  private current: Policy;
  private fingerprint = "";
  /** the version or the message of the last refused attempt, so a broken file is reported once */
  private lastRefusal: string | undefined;
  private watcher: FSWatcher | undefined;
  private interval: NodeJS.Timeout | undefined;
  private settle: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly kind: PolicyKind | undefined;
  /** the reload running, and the one asked for meanwhile (one compile at a time, later asks merged) */
  private inFlight: Promise<ReloadResult> | undefined;
  private queued: Promise<ReloadResult> | undefined;

  constructor(private readonly options: PolicyWatcherOptions) {
    this.current = options.initial;
    this.kind = kindOf(options.path);
  }

  /** the policy in force */
  get policy(): Policy {
    return this.current;
  }

  start(): void {
    this.options.metrics?.running(this.current.version);
    this.options.metrics?.loaded();
    warmCompiler();
    this.watchFolder();
    this.interval = setInterval(() => this.poll(), this.options.intervalMs ?? POLICY_CHECK_INTERVAL_MS);
    this.interval.unref();
    // Whatever changed between the start-up load and now.
    void this.reload();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.interval);
    clearTimeout(this.settle);
    this.watcher?.close();
    this.watcher = undefined;
  }

  /**
   * Reads POLICY_PATH now: "reloaded" when a new version is in force, "refused" when the
   * files do not load (the policy in force stays), "unchanged" otherwise.
   */
  reload(): Promise<ReloadResult> {
    if (this.inFlight === undefined) {
      this.inFlight = this.reloadOnce().finally(() => (this.inFlight = undefined));
      return this.inFlight;
    }
    return (this.queued ??= this.inFlight.then(() => {
      this.queued = undefined;
      return this.reload();
    }));
  }

  private async reloadOnce(): Promise<ReloadResult> {
    if (this.stopped) return "unchanged";
    this.fingerprint = fingerprintOf(this.options.path);
    let version: string | undefined;
    try {
      const files = readPolicyFiles(this.options.path, this.kind);
      version = versionOf(files);
      if (version === this.current.version) return "unchanged";
      if (version === this.lastRefusal) return "refused";
      const policy = await compileOffLoop(files, this.options.path);
      if (this.stopped) return "unchanged";
      const previous = this.current.version;
      this.current = policy;
      this.lastRefusal = undefined;
      this.options.metrics?.running(policy.version);
      this.options.metrics?.loaded();
      this.options.logger?.info({ version: policy.version, previous }, `policy ${policy.version} in force (was ${previous})`);
      this.options.onChange(policy);
      return "reloaded";
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err;
      // A read error has no version: the message tells one refusal from the next.
      const refusal = version ?? err.message;
      if (refusal === this.lastRefusal) return "refused";
      this.lastRefusal = refusal;
      this.options.metrics?.failed();
      this.options.logger?.warn({ version: this.current.version }, `policy not reloaded, ${this.current.version} stays in force: ${err.message}`);
      return "refused";
    }
  }

  private poll(): void {
    if (this.watcher === undefined) this.watchFolder();
    if (fingerprintOf(this.options.path) !== this.fingerprint) void this.reload();
  }

  private soon(): void {
    if (this.settle !== undefined || this.stopped) return;
    this.settle = setTimeout(() => {
      this.settle = undefined;
      void this.reload();
    }, SETTLE_MS);
    this.settle.unref();
  }

  /** fs.watch on the folder: a file replaced by rename, or a ConfigMap's swap, shows there. */
  private watchFolder(): void {
    if (this.stopped) return;
    let folder = this.options.path;
    try {
      if (!statSync(folder).isDirectory()) folder = path.dirname(folder);
      this.watcher = watch(folder, { persistent: false }, () => this.soon());
      this.watcher.on("error", () => {
        // The folder went away or cannot be watched: the interval keeps checking, and watches again.
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      this.watcher = undefined;
    }
  }
}
