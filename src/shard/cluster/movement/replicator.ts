import type { Logger } from "../../../logger.js";
import type { ReplicationMetrics } from "../../../metrics/replication-metrics.js";
import { mergeState, storeReplica } from "../../records/merge-states.js";
import { ringKeyOfStateKey } from "../../ring/state-key.js";
import { removalRecord, agesInPlace, forEachAgedRecord, isRemoval, maxRecordBytes, writeRecord, bornHere } from "../../records/state-records.js";
import type { StateTable, StoredState } from "../../table/state-table.js";
import type { ChangeLog } from "../../table/change-log.js";
import { CallMethod, MAX_BATCH_BYTES } from "../wire/call-methods.js";
import type { MemberPool } from "../membership/member-pool.js";
import { admitState } from "../wire/peer-data.js";
import type { HashRing } from "../../ring/ring.js";
import { RerunningPass } from "./rerunning-pass.js";
import { forEachKeySliced } from "./sliced-scan.js";
import type { FineLapses } from "../../../algorithms/fine-lapses.js";
import { keepPeerOverlays, mergeWithFine, type FineStore } from "../../local/fine-store.js";
import { encodeReplicatedWithFine, type FineRecord } from "../../records/fine-records.js";

/** Deadline of one replication call: a replica that does not answer is left behind, the next resync catches it up. */
const REPLICATE_TIMEOUT_MS = 2000;
/**
 * Replication calls awaiting their answer per member. Turns that end while one is in flight
 * add to the member's next batch (group commit), so a busy node sends fewer, larger calls:
 * the cost per decision falls as load rises. A batch that reaches MAX_BATCH_BYTES is sent
 * anyway, up to MAX_IN_FLIGHT; beyond that the member is too far behind and the batch is
 * dropped (counted; the pass after a ring change catches it up).
 */
const PIPELINE = 1;
const MAX_IN_FLIGHT = 64;

export interface ReplicatorOptions {
  /** REPLICAS: copies of each state, the owner's included */
  replicas: number;
  /**
   * REPLICATION_DELAY_MS: changes are gathered this long after the first one before they go
   * out (0: at the end of the event-loop turn). One timer for the whole table, not per key.
   */
  delayMs: number;
  pool: MemberPool;
  owned: StateTable;
  /** the states this node holds for other owners */
  replicaTable: StateTable;
  /**
   * The owner's fine lapses of its concurrency states (local/fine-store.ts): sent with their
   * states to replicas over links of FINE_REPLICAS, and where promoted replicas' overlays go.
   */
  ownedFine?: FineStore;
  /** The fine lapses of the replicas this node keeps, beside replicaTable (read at promotion). */
  replicaFine?: FineStore;
  logger: Logger;
  metrics: ReplicationMetrics;
}

/** One member's records, encoded as they are found (on this node's clock; turned into ages when sent). */
class Batch {
  buf = Buffer.allocUnsafe(16 * 1024);
  length = 0;
  count = 0;
  /**
   * The overlay of each key's LAST record in the batch (a copy, on this clock), for a link of
   * FINE_REPLICAS: an overlay travels only with the very state it refines. A key whose last
   * record has none has no entry, so an older record's overlay never rides on a newer state
   * (a slot released and taken again in one bucket would lapse at the old lease's second).
   */
  readonly fine = new Map<string, FineLapses>();

  reset(): void {
    this.length = 0;
    this.count = 0;
    this.fine.clear();
  }

  /** `fine`: the overlay that refines `s` now, if its owner keeps one. */
  add(key: string, s: StoredState, fine?: FineLapses): void {
    if (fine !== undefined) this.fine.set(key, fine);
    else if (this.fine.size > 0) this.fine.delete(key);
    const need = this.length + maxRecordBytes(key);
    if (need > this.buf.length) {
      const wider = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
      this.buf.copy(wider, 0, 0, this.length);
      this.buf = wider;
    }
    this.length = writeRecord(this.buf, this.length, key, s.a, s.b, s.c, s.expiresAt, s.origin, s.born);
    this.count++;
  }
}

/** Replication towards one member: the batch being filled and the calls awaiting an answer. */
class Link {
  readonly pending = new Batch();
  /** performance.now() of the oldest change in `pending` (for the lag) */
  oldestChange = 0;
  inFlight = 0;
  /** states in the calls awaiting an answer */
  inFlightStates = 0;
}

/**
 * Keeps REPLICAS − 1 copies of every state this node owns on the next distinct members of
 * the ring, and takes over the copies it holds when their owner leaves the ring
 * (docs/durability.md):
 *
 * - Every REPLICATION_DELAY_MS (each turn when 0), the states that requests (or merges)
 *   changed are sent once each, as states, to their replicas: a key changed 100 times in that
 *   time is sent once. A replica takes its owner's copy as it is (storeReplica: a refund
 *   lowers a count, and the copy must not keep the higher one). While a member's previous call is
 *   unanswered, turns add to its next batch (see PIPELINE). A state a reset removed goes
 *   as a removal (removalRecord, with the reset's time) in the same stream, so it is applied in order with the states.
 * - After a ring change, one pass (a slice per turn) promotes the replica states this node
 *   now owns into its own table (mergeState: never counted twice), drops the copies it is no
 *   longer a replica for, and sends each owned state to the replicas it did not have on the
 *   previous ring (a member that came back, a new successor).
 */
export class Replicator {
  private scheduled = false;
  private timer: NodeJS.Timeout | undefined = undefined;
  /** the owned table's log of changed keys, from start() */
  private changes: ChangeLog | undefined = undefined;
  private changedAt = 0;
  private readonly targets: string[] = [];
  private readonly links = new Map<string, Link>();
  private syncedRing: HashRing | undefined;
  private readonly resyncPass: RerunningPass;
  private stopped = false;

  constructor(private readonly o: ReplicatorOptions) {
    this.resyncPass = new RerunningPass(
      "replica resync",
      () => this.resync(),
      () => !this.stopped,
      o.logger,
    );
  }

  start(): void {
    this.syncedRing = this.o.pool.ring;
    const delayMs = this.o.delayMs;
    this.changes = this.o.owned.trackChanges(() => {
      if (this.scheduled) return;
      this.scheduled = true;
      this.changedAt = performance.now();
      // A turn at a time sent a call (two writes, a wake-up of the replica and an answer) for
      // about one decision at moderate load; gathering for a few ms sends one per link per
      // delay, and a key changed many times in it once (bench/README.md, the peer path).
      if (delayMs > 0) this.timer = setTimeout(this.flush, delayMs);
      else setImmediate(this.flush);
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /**
   * States changed here that their replicas have not acknowledged yet: waiting in a batch or
   * in a call (counted once per replica). 0 means every change so far is held by the replicas
   * that were up, or was counted as dropped.
   */
  backlog(): number {
    // Changes gathered for the next send count too.
    let n = this.changes?.pending ?? 0;
    for (const link of this.links.values()) n += link.pending.count + link.inFlightStates;
    return n;
  }

  /** The ring changed: promote, drop and re-replicate (one pass at a time, run again if it changes meanwhile). */
  onRingChanged(): void {
    if (!this.stopped) this.resyncPass.request();
  }

  /**
   * REPLICATE from `from`: keep each state as a replica, or merge it when this node owns the
   * key now. Checked like a hand-off: a batch that cannot be split into records is refused
   * whole (RangeError), a record out of bounds alone (admitState). Returns the records kept.
   */
  receive(payload: Buffer, from: string, now: number, fine?: readonly FineRecord[]): number {
    const { pool, owned, replicaTable, replicaFine } = this.o;
    const ring = pool.ring;
    const self = pool.self;
    let kept = 0;
    let refused = 0;
    // Every record replaces the replica's state and its overlay together: the overlay goes
    // here, and only the owner's overlay of the batch's last record of a key comes back (below).
    const overlays = replicaFine !== undefined && replicaFine.size > 0;
    const fromOwner = fine !== undefined && fine.length > 0 ? new Set<string>() : undefined;
    forEachAgedRecord(payload, (key, aged) => {
      // Sent with ages: put on this node's clock here, whatever the sender's reads.
      const state = admitState(key, aged, now);
      if (state === "invalid") {
        refused++;
        return;
      }
      if (overlays) replicaFine.drop(key);
      fromOwner?.delete(key);
      if (isRemoval(aged)) {
        this.applyRemoval(key, bornHere(aged.bornAgoS, now) * 1000, now);
        kept++;
        return;
      }
      if (state === "expired") return;
      // The sender's ring is behind this one's (an owner back from a pause): a copy of a
      // state this node owns now merges as a copy, so its stale counts change nothing (its
      // overlay is not read: those slots are held to their buckets' ends).
      const owner = ring.owner(ringKeyOfStateKey(key));
      if (owner === self) mergeState(owned, key, state, now);
      else if (storeReplica(replicaTable, key, state, now, owner === from) && owner === from) fromOwner?.add(key);
      kept++;
    });
    if (fromOwner !== undefined && fromOwner.size > 0 && replicaFine !== undefined) keepPeerOverlays(replicaTable, replicaFine, fine!, fromOwner, now);
    if (refused > 0) this.o.logger.warn({ from, refused }, "replicated states out of bounds: not kept");
    return kept;
  }

  /**
   * The owner reset this state at `resetAt` (unix ms here, rounded down to its second: never
   * later than the reset): drop the copy (and the state itself if this node owns the key
   * now), and remember the reset as the owner does, so that nothing counted before it is
   * merged back here (not this copy promoted, nor a stale one sent later), while what the
   * owner counted after it is.
   */
  private applyRemoval(key: string, resetAt: number, now: number): void {
    const { pool, owned, replicaTable } = this.o;
    const ringKey = ringKeyOfStateKey(key);
    owned.noteReset(ringKey, Math.min(resetAt, now), now);
    replicaTable.delete(key);
    this.o.replicaFine?.drop(key);
    const state = pool.ring.owner(ringKey) === pool.self ? owned.get(key) : undefined;
    if (state !== undefined && owned.countedBeforeReset(ringKey, state.born, now)) owned.remove(key);
  }

  /** One turn's changes, to the replicas of each. */
  private readonly flush = (): void => {
    this.scheduled = false;
    this.timer = undefined;
    const keys = this.o.owned.takeChanges();
    if (this.stopped) return;
    const ring = this.o.pool.ring;
    const now = Date.now();
    for (const key of keys) this.addToLinks(key, ring, undefined, this.changedAt, now);
    for (const [member, link] of this.links) {
      if (link.inFlight < PIPELINE && link.pending.count > 0) this.send(member, link);
      if (!ring.has(member) && link.inFlight === 0) this.links.delete(member);
    }
  };

  /** Put the owned state of `key` in the pending batch of each replica on `ring` that is not one on `before`. */
  private addToLinks(key: string, ring: HashRing, before: HashRing | undefined, changedAt: number, now: number): void {
    const { owned, pool, replicas, ownedFine } = this.o;
    const ringKey = ringKeyOfStateKey(key);
    // Gone since it changed: a reset's removal goes to the replicas (StateTable.remove);
    // a state that moved or lapsed is not sent, its replicas follow the ring or expire.
    // The reset's memory is asked only for a key gone: a clock read and a lookup fewer per state sent.
    let state = owned.get(key);
    let fine: FineLapses | undefined;
    if (state === undefined) {
      const resetAt = owned.resetAt(ringKey, now);
      if (resetAt === undefined) return;
      state = removalRecord(resetAt);
    } else if (ownedFine !== undefined && ownedFine.size > 0) {
      // The overlay that refines the state as it is sent (a copy): none for a key without one.
      fine = ownedFine.peek(key, state, now);
    }
    const targets = this.targets;
    const n = ring.successors(ringKey, replicas, targets);
    // Only the owner replicates: a stray state goes to its owner by the hand-off instead.
    if (n === 0 || targets[0] !== pool.self) return;
    let had: string[] | undefined;
    if (before !== undefined) {
      had = [];
      had.length = before.successors(ringKey, replicas, had);
    }
    for (let i = 1; i < n; i++) {
      const member = targets[i]!;
      if (had !== undefined && had.includes(member)) continue;
      this.queue(member, key, state, changedAt, fine);
    }
  }

  /** Put `state` of `key` in the pending batch to `member`. */
  private queue(member: string, key: string, state: StoredState, changedAt: number, fine?: FineLapses): void {
    let link = this.links.get(member);
    if (link === undefined) this.links.set(member, (link = new Link()));
    if (link.pending.count === 0) link.oldestChange = changedAt;
    link.pending.add(key, state, fine);
    if (link.pending.length >= MAX_BATCH_BYTES) this.send(member, link);
  }

  /** Send the link's pending batch and empty it; when the answer comes, send what piled up meanwhile. */
  private send(member: string, link: Link): void {
    const { pool, metrics } = this.o;
    const batch = link.pending;
    const count = batch.count;
    const changedAt = link.oldestChange;
    const records = batch.buf.subarray(0, batch.length);
    // Filled over the turns a call was in flight: every age is measured now, at the send.
    const sentAt = Date.now();
    agesInPlace(batch.buf, 0, batch.length, sentAt);
    const client = pool.client(member);
    // The overlays go only where the link speaks FINE_REPLICAS; below it, REPLICATE byte for byte as before.
    const withFine = batch.fine.size > 0 && client?.link.supports("FINE_REPLICAS") === true;
    const payload = withFine ? encodeReplicatedWithFine(records, [...batch.fine].map(([key, fine]) => ({ key, fine })), sentAt) : records;
    batch.reset();
    // Not up: it is off the ring, and the pass after it comes back sends it everything.
    if (client === undefined || client.state !== "up" || link.inFlight >= MAX_IN_FLIGHT) {
      metrics.dropped(count);
      return;
    }
    link.inFlight++;
    link.inFlightStates += count;
    metrics.sent(count);
    const settled = (ok: boolean) => {
      link.inFlight--;
      link.inFlightStates -= count;
      if (ok) metrics.replicated(count, (performance.now() - changedAt) / 1000);
      else metrics.dropped(count);
      if (!this.stopped && link.inFlight < PIPELINE && link.pending.count > 0) this.send(member, link);
    };
    // call() copies the payload into its frame at once: the batch's buffer is free again on return.
    client.call(withFine ? CallMethod.REPLICATE_FINE : CallMethod.REPLICATE, payload, REPLICATE_TIMEOUT_MS).then(
      () => settled(true),
      () => settled(false),
    );
  }

  private async resync(): Promise<void> {
    const { pool, owned, replicaTable, replicas, metrics, ownedFine, replicaFine } = this.o;
    const ring = pool.ring;
    const before = this.syncedRing;
    this.syncedRing = ring;
    const self = pool.self;

    // Replica states: promote those this node owns now, drop those it no longer keeps.
    let promoted = 0;
    let dropped = 0;
    const targets: string[] = [];
    const replicasDone = await forEachKeySliced(replicaTable, (keys) => {
      if (this.stopped) return false;
      const now = Date.now();
      const changedAt = performance.now();
      for (const key of keys) {
        const ringKey = ringKeyOfStateKey(key);
        const n = ring.successors(ringKey, replicas, targets);
        if (n > 0 && targets[0] === self) {
          const state = replicaTable.get(key);
          replicaTable.delete(key);
          // With the overlay its owner sent (REPLICATE_FINE): the promoted slots lapse at
          // their leases' own seconds, not their buckets' ends (mergeWithFine fits it again).
          const fine = state === undefined || replicaFine === undefined ? undefined : replicaFine.peek(key, state, now);
          replicaFine?.drop(key);
          const merged =
            state !== undefined && (fine !== undefined && ownedFine !== undefined ? mergeWithFine(owned, ownedFine, key, state, fine, now) : mergeState(owned, key, state, now));
          if (merged) promoted++;
          continue;
        }
        // The key has a new owner that may hold no copy: with zones, the next owner on the
        // ring can be in the lost owner's zone while the copy is in another. Send it this one;
        // it merges it as a copy (receive), so a copy it had already changes nothing.
        // Only when the previous owner is off the ring: one still on it (a member joined) hands
        // the new owner the state itself, and a copy arriving first, up to
        // REPLICATION_DELAY_MS behind, would let a joiner decide on counts already spent.
        const previous = before?.owner(ringKey);
        if (n > 0 && previous !== undefined && previous !== targets[0] && !ring.has(previous)) {
          const state = replicaTable.get(key);
          if (state !== undefined) this.queue(targets[0]!, key, state, changedAt);
        }
        if (!targets.slice(0, n).includes(self)) {
          replicaTable.delete(key);
          replicaFine?.drop(key);
          dropped++;
        }
      }
      for (const [member, link] of this.links) if (link.inFlight < PIPELINE && link.pending.count > 0) this.send(member, link);
    });
    if (!replicasDone) return;

    // Owned states (the promoted ones included): to the replicas they did not have on the previous ring.
    const ownedDone = await forEachKeySliced(owned, (keys) => {
      if (this.stopped) return false;
      const changedAt = performance.now();
      const now = Date.now();
      for (const key of keys) this.addToLinks(key, pool.ring, before, changedAt, now);
      for (const [member, link] of this.links) if (link.inFlight < PIPELINE && link.pending.count > 0) this.send(member, link);
    });
    if (!ownedDone) return;
    metrics.promoted(promoted);
    if (promoted > 0 || dropped > 0) this.o.logger.info({ promoted, dropped, members: ring.members }, "replicas: promoted the states this node now owns");
  }
}
