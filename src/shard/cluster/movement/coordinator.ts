import type { Logger } from "../../../logger.js";
import { PEER_DEFAULTS } from "../../../peer/index.js";
import type { StateTable } from "../../table/state-table.js";
import { CallMethod } from "../wire/call-methods.js";
import { handOverStates, type HandOffReport } from "./handoff-sender.js";
import type { MemberPool } from "../membership/member-pool.js";
import { RerunningPass } from "./rerunning-pass.js";
import type { FineStore } from "../../local/fine-store.js";

/** After a join, a second reconcile pass catches states created by forwards still in flight on the old ring. */
const RECONCILE_AGAIN_MS = 500;
/**
 * After adding a member, how long this node refuses forwarded decisions for keys that now
 * belong to it: long enough for every other node to add it too. Another node adds it when
 * its client reconnects, at worst after the client's longest reconnect backoff, plus the
 * handshake and first heartbeat (3 s of slack); so the fence is derived from that backoff
 * and can never fall below it.
 */
export const JOIN_FENCE_MS = PEER_DEFAULTS.reconnectMaxMs + 3000;
/** A starting node waits at most this long for every member's HANDOFF_DONE. */
export const JOIN_TIMEOUT_MS = 10_000;
/** Deadline of the hand-off a ring change starts (a leave has its own, the drain deadline). */
const RECONCILE_DEADLINE_MS = 30_000;
/**
 * Stray states (see ownership.ts) move to their owner only once no stray decision has
 * arrived for this long. While rings disagree (a one-way cut, a peer suspected by one side
 * only), strays keep coming: moving the state each time restarted its count at 1 here
 * (the fault suite measured 133 allowed in one window of 20), whereas keeping it bounds
 * the key to two counts, the owner's and this one, until the rings agree and merge them.
 */
const STRAY_QUIET_MS = 10_000;
/** While leaving, how often states that found no reachable owner are tried again on the current ring. */
const LEAVE_RETRY_MS = 100;

/**
 * Moves states to their owners when the ring changes, and keeps the state that says when
 * this node may decide what:
 *
 * - joining: a node that has just started is joining until every member on its ring has
 *   handed it the states that moved to it (HANDOFF_DONE). Meanwhile a key it holds no state
 *   for is not decided on a partial state: it fails open. A plain field, advanced by events
 *   (HANDOFF_DONE received, the member pool settled, the ring changed) or JOIN_TIMEOUT_MS.
 * - join fences: see JOIN_FENCE_MS.
 * - frozen: leaving; this node's states are moving and none is decided here any more.
 * - reconcile: states held here but owned by another member are sent to it, one pass at a
 *   time, and the members added since the last pass are told HANDOFF_DONE after it.
 */
export class Coordinator {
  joining = true;
  frozen = false;
  /** members that told this node they handed it its states */
  private readonly doneFrom = new Set<string>();
  /** members added to the ring recently (until when): see JOIN_FENCE_MS */
  private readonly fences = new Map<string, number>();
  /** members owed a HANDOFF_DONE once the running reconcile has sent their states */
  private readonly owedDone = new Set<string>();
  private readonly reconcile: RerunningPass;
  private strayTimer: NodeJS.Timeout | undefined;
  private lastStrayAt = -Infinity;
  private joinTimer: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();
  private stopped = false;

  constructor(
    private readonly pool: MemberPool,
    private readonly table: StateTable,
    private readonly logger: Logger,
    /** the owner's fine lapses, handed over with their states (handoff-sender.ts) */
    private readonly fineLapses?: FineStore,
  ) {
    this.reconcile = new RerunningPass(
      "reconcile",
      () => this.reconcileOnce(),
      () => !this.stopped && !this.frozen,
      logger,
    );
  }

  start(): void {
    this.joinTimer = setTimeout(() => this.joinTimedOut(), JOIN_TIMEOUT_MS);
    this.joinTimer.unref();
  }

  fencedUntil(member: string): number | undefined {
    return this.fences.get(member);
  }

  /** The member pool swapped its ring. */
  onRingChanged(joined: readonly string[]): void {
    const { ring, self } = this.pool;
    // This node's name entered its ring after a time out of it (its PEERS list is the newest:
    // member-lists.ts): it joins as a fresh node does, keys without their state failing open
    // until each member hands its states over. Left out of it, it sends every state it holds on.
    if (joined.includes(self) && !this.frozen && !this.stopped) this.rejoin();
    const out = !ring.has(self) && !this.frozen;
    // A member joined: keys that now belong to it move there from whoever holds them,
    // then it is told this node is done (it waits for that from every member when new).
    if (joined.length > 0 && !this.frozen) {
      const until = Date.now() + JOIN_FENCE_MS;
      for (const m of joined) {
        this.fences.set(m, until);
        this.owedDone.add(m);
      }
      this.scheduleReconcile(true);
    } else if (out && this.table.size > 0) this.scheduleReconcile(false);
    this.checkJoined();
  }

  private rejoin(): void {
    this.joining = true;
    this.doneFrom.clear();
    clearTimeout(this.joinTimer);
    this.joinTimer = setTimeout(() => this.joinTimedOut(), JOIN_TIMEOUT_MS);
    this.joinTimer.unref();
  }

  onSettled(): void {
    this.checkJoined();
  }

  onHandoffDone(from: string): void {
    this.doneFrom.add(from);
    this.checkJoined();
  }

  /** A forwarded decision was made here for a key the ring gives to another member: reconcile once strays stop (STRAY_QUIET_MS). */
  noteStrayState(): void {
    this.lastStrayAt = Date.now();
    if (this.strayTimer !== undefined || this.frozen || this.stopped) return;
    const check = (): void => {
      const quietFor = Date.now() - this.lastStrayAt;
      if (quietFor < STRAY_QUIET_MS) {
        this.strayTimer = setTimeout(check, STRAY_QUIET_MS - quietFor);
        this.strayTimer.unref();
        return;
      }
      this.strayTimer = undefined;
      if (!this.frozen && !this.stopped) this.scheduleReconcile(false);
    };
    this.strayTimer = setTimeout(check, STRAY_QUIET_MS);
    this.strayTimer.unref();
  }

  /**
   * Leave the cluster without losing a counted request (docs/architecture.md): freeze this
   * node's keys (they fail open instead of being decided on a state that is moving), send
   * every state to its owner on the ring without this node, then tell every peer to drop
   * this node. Bounded by `deadline` (unix ms).
   */
  async leave(deadline: number): Promise<HandOffReport> {
    const started = Date.now();
    this.frozen = true;
    const pool = this.pool;
    const ringWithoutMe = pool.ring.without(pool.self);
    let report: HandOffReport = { sent: 0, failed: this.table.size, ms: 0 };
    if (ringWithoutMe.size > 0) report = await this.handOver((key) => ringWithoutMe.owner(key), deadline);
    // A batch whose receiver went down (cut off, say) failed as soon as it was declared
    // down, and its states came back here: send them to their owner on the ring as it is
    // now, which no longer holds that member, rather than keep them until the process exits.
    let ring = ringWithoutMe;
    while (report.failed > 0 && Date.now() < deadline && !this.stopped) {
      await new Promise((r) => setTimeout(r, LEAVE_RETRY_MS));
      const now = pool.ring.without(pool.self);
      if (now.size === 0) break;
      if (now.members.join() === ring.members.join()) continue;
      ring = now;
      const retry = await this.handOver((key) => ring.owner(key), deadline);
      this.logger.info({ members: ring.members, sent: retry.sent, failed: retry.failed }, "leave: states of an unreachable member sent to their next owner");
      report = { sent: report.sent + retry.sent, failed: retry.failed, ms: 0 };
    }
    const name = Buffer.from(pool.self);
    await Promise.allSettled(pool.upClients().map((c) => c.call(CallMethod.LEAVE, name, Math.max(50, deadline - Date.now()))));
    pool.leaveRing();
    report.ms = Date.now() - started;
    return report;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.strayTimer);
    clearTimeout(this.joinTimer);
  }

  /** Joined once the pool has settled and every other ring member said HANDOFF_DONE. */
  private checkJoined(): void {
    if (!this.joining || !this.pool.settled) return;
    const { ring, self } = this.pool;
    // Out of its own ring (another member does not list it) it owns no key and waits for none.
    if (ring.has(self)) for (const m of ring.members) if (m !== self && !this.doneFrom.has(m)) return;
    this.joining = false;
    clearTimeout(this.joinTimer);
    this.logger.info({ members: ring.members, ms: Date.now() - this.startedAt }, "joined: every member handed over");
  }

  private joinTimedOut(): void {
    if (!this.joining) return;
    this.joining = false;
    const { ring, self } = this.pool;
    const missing = ring.members.filter((m) => m !== self && !this.doneFrom.has(m));
    this.logger.warn({ missing }, "join: not every member confirmed its hand-off in time; deciding anyway");
  }

  private handOver(ownerOf: (ringKey: string) => string | undefined, deadline: number): Promise<HandOffReport> {
    const pool = this.pool;
    return handOverStates(this.table, { self: pool.self, ownerOf, peer: (m) => pool.client(m), deadline, logger: this.logger, fineLapses: this.fineLapses });
  }

  /** Send every state this node holds but does not own to its owner; run one at a time. */
  private scheduleReconcile(again: boolean): void {
    this.reconcile.request();
    if (again) setTimeout(() => !this.stopped && !this.frozen && this.reconcile.request(), RECONCILE_AGAIN_MS).unref();
  }

  private async reconcileOnce(): Promise<void> {
    const ring = this.pool.ring;
    const owed = [...this.owedDone].filter((m) => ring.has(m));
    for (const m of owed) this.owedDone.delete(m);
    // While strays still arrive, only members that just joined get their states; see STRAY_QUIET_MS.
    const now = Date.now();
    const keepStrays = now - this.lastStrayAt < STRAY_QUIET_MS;
    const ownerOf = (key: string): string | undefined => {
      const owner = ring.owner(key);
      return !keepStrays || (owner !== undefined && (this.fences.get(owner) ?? 0) > now) ? owner : undefined;
    };
    const report = await this.handOver(ownerOf, now + RECONCILE_DEADLINE_MS);
    if (report.sent > 0 || report.failed > 0) this.logger.info(report, "handed states to their new owners");
    await Promise.allSettled(owed.map((m) => this.pool.client(m)?.call(CallMethod.HANDOFF_DONE, Buffer.alloc(0))));
  }
}
