import { hash32 } from "../hash.js";

/** Points per member: with 160 the busiest of 3–10 members owns within ~10% of its fair share. */
export const VIRTUAL_NODES = 160;

/**
 * A consistent-hash ring: an immutable value. A membership change builds a new ring and
 * swaps it in one assignment; a lookup never sees a half-built ring.
 *
 * Every node given the same member names builds the same ring: points depend only on
 * the names, ties are broken by name, and the member list is sorted first.
 */
export class HashRing {
  readonly members: readonly string[];
  private readonly points: Uint32Array;
  private readonly owners: Uint16Array;

  constructor(members: Iterable<string>, virtualNodes = VIRTUAL_NODES) {
    this.members = Object.freeze([...new Set(members)].sort());
    if (this.members.length > 0xffff) throw new RangeError("too many ring members");
    const entries: { point: number; owner: number }[] = [];
    this.members.forEach((name, owner) => {
      for (let v = 0; v < virtualNodes; v++) entries.push({ point: hash32(name + "#" + v), owner });
    });
    entries.sort((x, y) => x.point - y.point || x.owner - y.owner);
    this.points = Uint32Array.from(entries, (e) => e.point);
    this.owners = Uint16Array.from(entries, (e) => e.owner);
  }

  get size(): number {
    return this.members.length;
  }

  has(member: string): boolean {
    return this.members.includes(member);
  }

  /** The member owning `key`: the first point clockwise from the key's hash. */
  owner(key: string): string | undefined {
    const points = this.points;
    const n = points.length;
    if (n === 0) return undefined;
    const h = hash32(key);
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return this.members[this.owners[lo === n ? 0 : lo]!];
  }

  with(member: string): HashRing {
    return this.has(member) ? this : new HashRing([...this.members, member]);
  }

  without(member: string): HashRing {
    return this.has(member) ? new HashRing(this.members.filter((m) => m !== member)) : this;
  }
}
