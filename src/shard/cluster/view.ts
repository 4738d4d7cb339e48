import type { PeerClient } from "../../peer/index.js";
import { stateKeyOf } from "../ring/state-key.js";
import type { HashRing } from "../ring/ring.js";
import type { StateTable } from "../table/state-table.js";
import type { MemberPool } from "./membership/member-pool.js";
import type { Coordinator } from "./movement/coordinator.js";
import type { ClusterView } from "./routing/forwarding.js";

/**
 * What the ownership rule, the forwarding and the inbound handler read of the cluster at the
 * moment of a decision (ownership.ts): the member pool's ring and connections, the
 * coordinator's join and leave state, and which states this node's table holds.
 */
export class LiveView implements ClusterView {
  constructor(
    private readonly pool: MemberPool,
    private readonly coordinator: Coordinator,
    private readonly table: StateTable,
  ) {}

  get self(): string {
    return this.pool.self;
  }
  get ring(): HashRing {
    return this.pool.ring;
  }
  get frozen(): boolean {
    return this.coordinator.frozen;
  }
  get joining(): boolean {
    return this.coordinator.joining;
  }
  holds(algorithmCode: number, duration: number, ringKey: string): boolean {
    return this.table.get(stateKeyOf(algorithmCode, duration, ringKey)) !== undefined;
  }
  fencedUntil(member: string): number | undefined {
    return this.coordinator.fencedUntil(member);
  }
  isUp(member: string): boolean {
    return this.pool.isUp(member);
  }
  get apart(): boolean {
    return this.pool.apart > 0 && !this.pool.quorum;
  }
  get doubtUntil(): number {
    return this.pool.doubts.until;
  }
  ownerInDoubt(ringKey: string, now: number): boolean {
    return this.pool.doubts.ownerInDoubt(ringKey, now);
  }
  client(member: string): PeerClient | undefined {
    return this.pool.client(member);
  }
  noteForward(member: string, timedOut: boolean, now: number): void {
    this.pool.noteForward(member, timedOut, now);
  }
}
