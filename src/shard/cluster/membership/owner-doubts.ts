import { HashRing } from "../../ring/ring.js";

/**
 * Members this node took off its ring without knowing they stopped deciding, for
 * TAKEOVER_HOLD_MS after each drop (docs/faults.md, "A ring flap"): a member that went
 * silent (FAILURE_TIMEOUT_MS) or was suspected of being slow may be running all along, seen
 * by the other nodes and counting the requests that reach it. Whoever decided its keys here
 * meanwhile would start from what this node holds (nothing, or a copy a moment old) and
 * admit, as exact answers, requests the owner had already counted up to the limit. So its
 * keys are not decided here, nor sent to their next owner, until the hold ends or the
 * member is back; each is answered `degraded` and counted nowhere, unless what this node
 * holds already blocks it.
 *
 * A member whose connection was refused or closed (its process exited: SIGKILL, a crash, a
 * restart), that announced its leave (its states were handed over), or that left the member
 * list is gone for sure: its keys are decided by their next owner at once, from the copy.
 *
 * Read on every decision while a hold runs, and only then: `until` is the one number a
 * stable ring's decisions compare.
 */
export class OwnerDoubts {
  /** unix ms until which some member is in doubt; 0 when none */
  until = 0;
  /** member → unix ms its hold ends */
  private readonly doubted = new Map<string, number>();
  /** this node's ring with the doubted members put back: who owned each key before the drops */
  private before: HashRing | undefined;
  /** the members `before` was built of, so an update that changes nothing builds no ring */
  private beforeOf = "";

  /** `holdMs`: TAKEOVER_HOLD_MS; 0 turns the hold off */
  constructor(private readonly holdMs: number) {}

  /** `member`, on this node's ring until now, leaves it without a sign that it stopped. */
  dropped(member: string, now: number): void {
    if (this.holdMs > 0) this.doubted.set(member, now + this.holdMs);
  }

  /** `member` is back on the ring, or gone for sure (see the class). */
  cleared(member: string): void {
    this.doubted.delete(member);
  }

  /** After dropped()/cleared() or any ring swap: `ring` is this node's ring now. */
  update(ring: HashRing, now: number): void {
    let until = 0;
    for (const [member, end] of this.doubted) {
      if (end <= now || ring.has(member)) this.doubted.delete(member);
      else until = Math.max(until, end);
    }
    this.until = until;
    if (until === 0) {
      this.before = undefined;
      this.beforeOf = "";
      return;
    }
    // Owners are a function of the member names alone: the ring of now plus the doubted
    // members gives each key the owner it had before they were dropped.
    const members = [...ring.members, ...this.doubted.keys()];
    const of = members.join(",");
    if (of === this.beforeOf) return;
    this.before = new HashRing(members);
    this.beforeOf = of;
  }

  /** Whether `ringKey` belonged to a member whose hold runs at `now`. */
  ownerInDoubt(ringKey: string, now: number): boolean {
    if (now >= this.until || this.before === undefined) return false;
    const owner = this.before.owner(ringKey);
    const end = owner === undefined ? undefined : this.doubted.get(owner);
    return end !== undefined && now < end;
  }
}
