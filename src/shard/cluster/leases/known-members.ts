/** Names remembered at most: past SHARE_MAX_MEMBERS nothing is shared, so more names change nothing. */
const MAX_NAMES = 64;

/**
 * Every member this node has known since it started, itself included: the ring's, the
 * configured ones and those that authenticated to it. It only grows (a member that left may
 * still hold a share of a window it saw), so an owner holds back one share for each other
 * member (share-rule.ts) and a sharer counts the cluster it may share in.
 */
export class KnownMembers {
  private readonly others = new Set<string>();
  private configured = 0;

  constructor(private readonly onChange: (count: number) => void) {}

  /** Members this node has known at most at once, itself included. */
  get count(): number {
    return Math.max(this.others.size + 1, this.configured);
  }

  note(members: Iterable<string>, self: string, configuredCount: number): void {
    const before = this.count;
    for (const m of members) if (m !== self && this.others.size < MAX_NAMES) this.others.add(m);
    this.configured = Math.max(this.configured, configuredCount);
    if (this.count !== before) this.onChange(this.count);
  }
}
