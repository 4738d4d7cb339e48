import type { Logger } from "../../../logger.js";
import { rangeText, sharedVersion, supportsAt, type ProtocolFeature, type ProtocolRange } from "../../../peer/index.js";

/**
 * The peer protocol version this node's ring runs at (docs/peer-protocol.md, "Versions"): the
 * lowest of the versions its links run at, each the highest both ends speak. A member's range
 * is the one it told on its last connection, kept while it is configured, down or not: a
 * member seen at 11 holds the ring at 11 until it comes back speaking more (a rolling upgrade
 * turns a feature on only once the last old node has been replaced, and a restart does not
 * turn it on and off). A member never reached does not count until it is.
 *
 * Invariant: a feature is used only when every member this node has reached speaks its version,
 * so no member receives a request it cannot read, and a rule every member must apply alike (what
 * an owner holds back) changes only when all of them can follow.
 */
export class RingProtocol {
  private readonly ranges = new Map<string, ProtocolRange>();
  /** members that authenticated and speak no version this node does, with what they speak */
  private readonly apart = new Map<string, ProtocolRange>();
  private current: number;
  /** Called when the ring's version changes (assemble.ts switches what depends on it). */
  onVersion: ((version: number) => void) | undefined;

  constructor(
    readonly own: ProtocolRange,
    private readonly logger: Logger,
  ) {
    this.current = own.max;
  }

  /** The version the ring runs at. */
  get version(): number {
    return this.current;
  }

  /** Whether the ring uses `feature` (constants.ts FEATURE_VERSIONS). */
  supports(feature: ProtocolFeature): boolean {
    return supportsAt(this.current, feature);
  }

  /** Members this node cannot speak with (no shared version). */
  get incompatible(): number {
    return this.apart.size;
  }

  /** `member` is up, speaking `range` (a link at a shared version). */
  linked(member: string, range: ProtocolRange): void {
    this.apart.delete(member);
    this.ranges.set(member, range);
    this.update();
  }

  /** `member` proved itself but speaks no version this node does: said once per range it offers. */
  refused(member: string, range: ProtocolRange): void {
    const before = this.apart.get(member);
    this.apart.set(member, range);
    this.ranges.delete(member);
    this.update();
    if (before !== undefined && before.min === range.min && before.max === range.max) return;
    this.logger.error(
      { peer: member, peerProtocol: rangeText(range), protocol: rangeText(this.own) },
      "cannot join this member: it speaks no peer protocol version this node does; this node is not ready until it sees a majority of the members it can speak with (upgrade the older nodes first, or pin PEER_PROTOCOL_MAX: docs/operations.md, Rolling upgrades)",
    );
  }

  /** The configured members changed: those gone are forgotten. */
  keepOnly(members: readonly string[]): void {
    for (const map of [this.ranges, this.apart]) for (const m of [...map.keys()]) if (!members.includes(m)) map.delete(m);
    this.update();
  }

  private update(): void {
    let v = this.own.max;
    for (const range of this.ranges.values()) v = Math.min(v, sharedVersion(this.own, range) ?? v);
    if (v === this.current) return;
    this.logger.info({ protocol: v, was: this.current, speaks: rangeText(this.own) }, "the ring's peer protocol version changed");
    this.current = v;
    this.onVersion?.(v);
  }
}
