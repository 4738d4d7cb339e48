import { mkdir, readdir, rename, unlink } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "../../logger.js";
import type { DurabilityMetrics } from "../../metrics/durability-metrics.js";
import { mergeState } from "./merge-states.js";
import { loadNodeKey } from "./node-key.js";
import { SnapshotRefused, maxSnapshotBytes, readSnapshot, snapshotKey, writeSnapshot, type SnapshotKey } from "./snapshot-file.js";
import { admitSnapshotState } from "./state-check.js";
import type { StateTable } from "../table/state-table.js";
import { fitFine } from "../../algorithms/fine-lapses.js";
import type { FineStore } from "../local/fine-store.js";
import { parseStateKey } from "../ring/state-key.js";
import type { FineRecord } from "./fine-records.js";

/** One file per STATE_DIR: a node's identity may change across restarts (a pod's IP), its volume does not. */
export const SNAPSHOT_FILE = "ringlimit.snapshot";
/** A refused file is moved aside under this suffix (one kept) for an operator to inspect; it is never loaded. */
const REFUSED_SUFFIX = ".refused";
/** Temporary files of writes a crash interrupted (snapshot-file.ts names them so): removed at start. */
const TEMPORARY = /^ringlimit\.snapshot\.(.+\.)?tmp$/;

export interface SnapshotterOptions {
  dir: string;
  intervalMs: number;
  /**
   * clusterKey(CLUSTER_SECRET), the root of the snapshot MAC's key; without a cluster secret
   * the node key in STATE_DIR (node-key.ts) is the root.
   */
  clusterKey: Buffer | undefined;
  /** this node's current name, recorded in the header for operators */
  nodeId: () => string;
  owned: StateTable;
  /** replica states, when this node holds any (REPLICAS > 1) */
  replicas?: StateTable;
  logger: Logger;
  metrics: DurabilityMetrics;
  /** the owner's fine lapses (local/fine-store.ts): written with the owned states, restored beside them */
  fineLapses?: FineStore;
}

export interface RestoreReport {
  owned: number;
  replicas: number;
  /** records skipped because they expired while the node was down */
  expired: number;
  /** records skipped because they were out of the contract's bounds (state-check.ts) */
  invalid: number;
  ms: number;
  refused?: string;
}

/**
 * Writes this node's states to STATE_DIR every SNAPSHOT_INTERVAL_MS and at stop, and loads
 * them at start (docs/durability.md). One write runs at a time; a failed write (disk full,
 * read-only volume) is logged and counted and leaves the previous snapshot in place.
 */
export class Snapshotter {
  readonly file: string;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private key: SnapshotKey | undefined;
  /** what the tables could hold, as a file: anything larger was not written by this node */
  private readonly maxBytes: number;

  constructor(private readonly options: SnapshotterOptions) {
    this.file = path.join(options.dir, SNAPSHOT_FILE);
    this.maxBytes = maxSnapshotBytes(options.replicas === undefined ? [options.owned] : [options.owned, options.replicas], options.fineLapses?.maxBytes ?? 0);
  }

  /** The MAC's key: from the cluster key, else the node key (made on first use). */
  private async snapshotKey(): Promise<SnapshotKey> {
    if (this.key !== undefined) return this.key;
    const { clusterKey, dir, logger } = this.options;
    if (clusterKey !== undefined) return (this.key = snapshotKey(clusterKey));
    const nodeKey = await loadNodeKey(dir);
    if (nodeKey.replaced !== undefined) {
      logger.error({ dir, reason: nodeKey.replaced }, "node key in STATE_DIR refused (moved aside): a new key signs this node's snapshots");
    } else if (nodeKey.created) logger.info({ dir }, "node key created in STATE_DIR: it signs this node's snapshots");
    return (this.key = snapshotKey(nodeKey.key));
  }

  /** Temporary files left by writes a crash interrupted: never read, removed (a link is removed itself, its target untouched). */
  private async removeTemporaries(): Promise<void> {
    for (const name of await readdir(this.options.dir)) {
      if (TEMPORARY.test(name)) await unlink(path.join(this.options.dir, name)).catch(() => undefined);
    }
  }

  /**
   * Load the snapshot into the tables, merging with what they hold (mergeState: a copy of
   * a state already there is never counted twice). Never throws: a file that cannot be
   * used is refused with a log line naming the reason, moved aside, and the node starts empty.
   */
  async restore(now: number): Promise<RestoreReport> {
    const { owned, replicas, logger, metrics } = this.options;
    const started = Date.now();
    const report: RestoreReport = { owned: 0, replicas: 0, expired: 0, invalid: 0, ms: 0 };
    try {
      await mkdir(this.options.dir, { recursive: true });
      await this.removeTemporaries();
      const identity = { key: await this.snapshotKey(), nodeId: this.options.nodeId() };
      const fine: FineRecord[] = [];
      const contents = await readSnapshot(
        this.file,
        identity,
        (key, stored, replica) => {
          // Held to the contract's bounds like a peer's record: a count of -1,000,000, NaN, an expiry years ahead are not loaded.
          const state = admitSnapshotState(key, stored, now);
          if (state === "invalid") report.invalid++;
          // Without a replica table (REPLICAS=1 now), a replica state goes to the owned table:
          // the hand-off moves it to its owner, who merges it as the copy it is.
          else if (state === "expired" || !mergeState(replica && replicas !== undefined ? replicas : owned, key, state, now)) report.expired++;
          else if (replica) report.replicas++;
          else report.owned++;
        },
        this.maxBytes,
        (r) => fine.push(r),
      );
      this.restoreFine(fine, now);
      report.ms = Date.now() - started;
      if (contents === undefined) {
        logger.info({ file: this.file }, "no snapshot in STATE_DIR: starting empty");
        return report;
      }
      metrics.keysRestored.inc(report.owned + report.replicas);
      if (report.invalid > 0) {
        logger.error({ file: this.file, invalid: report.invalid }, "snapshot records out of the request contract's bounds were not loaded");
      }
      logger.info(
        { file: this.file, writtenBy: contents.nodeId, writtenAt: new Date(contents.writtenAt).toISOString(), bytes: contents.bytes, ...report },
        "restored states from snapshot",
      );
    } catch (err) {
      report.refused = (err as Error).message;
      report.ms = Date.now() - started;
      const aside = this.file + REFUSED_SUFFIX;
      await rename(this.file, aside).catch(() => undefined);
      logger.error(
        { file: this.file, movedTo: aside, reason: report.refused, statesLoadedBeforeRefusal: report.owned + report.replicas },
        err instanceof SnapshotRefused ? "snapshot refused: starting without it" : "snapshot could not be loaded: starting without it",
      );
    }
    return report;
  }

  /**
   * The overlays of a format 4 file, beside the owned states just loaded: each fitted to its
   * key's state (fitFine: what would not refine it goes), so a file's overlay can free no slot
   * a state does not count, however it was written. Same clock: the seconds are as written.
   */
  private restoreFine(records: readonly FineRecord[], now: number): void {
    const store = this.options.fineLapses;
    if (store === undefined) return;
    for (const r of records) {
      const parsed = parseStateKey(r.key);
      const state = parsed === undefined ? undefined : this.options.owned.get(r.key);
      if (state === undefined || parsed === undefined) continue;
      const D = parsed.duration * 1000;
      store.install(r.key, fitFine(state, { s: r.lapse, m: r.m, a: 0, b: 0, c: 0 }, D, now), D);
    }
  }

  /** Write every intervalMs from now on. */
  start(): void {
    this.timer = setInterval(() => void this.write(), this.options.intervalMs);
    this.timer.unref();
  }

  /**
   * Write a snapshot now, after the one running (if any) has finished: the last write
   * at stop must see the table as it is then. Resolves whether the write worked or not.
   */
  async write(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
    this.writing = this.writeOnce().finally(() => (this.writing = undefined));
    return this.writing;
  }

  /** Stop the timer and write a last snapshot of whatever the node still holds. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.write();
  }

  private async writeOnce(): Promise<void> {
    const { owned, replicas, logger, metrics } = this.options;
    const started = performance.now();
    const copyStarted = started;
    const ownedCopy = owned.copy();
    const replicaCopy = replicas?.copy();
    // In the same step as the copy: each overlay refines the state copied.
    const fine = this.options.fineLapses?.copyFor(owned, Date.now()) ?? [];
    const copyMs = performance.now() - copyStarted;
    try {
      const identity = { key: await this.snapshotKey(), nodeId: this.options.nodeId() };
      const written = await writeSnapshot(this.file, identity, ownedCopy, replicaCopy, Date.now(), fine);
      const seconds = (performance.now() - started) / 1000;
      metrics.snapshotSeconds.observe(seconds);
      metrics.snapshotBytes.set(written.bytes);
      metrics.snapshotKeys.set(written.keys);
      metrics.lastSnapshot.set(Date.now() / 1000);
      logger.debug(
        { keys: written.keys, bytes: written.bytes, ms: seconds * 1000, copyMs, longestStepMs: Math.max(copyMs, written.longestStepMs) },
        "snapshot written",
      );
    } catch (err) {
      metrics.snapshotFailures.inc();
      const code = (err as NodeJS.ErrnoException).code;
      logger.error({ file: this.file, code, err: (err as Error).message }, "snapshot write failed; the previous snapshot stays in place");
    }
  }
}
