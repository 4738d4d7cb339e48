import type { Logger } from "../../../logger.js";

/** Members remembered at most: a name churn (DNS) cannot grow the map without bound. */
const MAX_MEMBERS = 4096;

/**
 * Which policy each member runs, as its heartbeats tell (every PONG carries the answering
 * node's policy version: docs/policy.md, One policy across the ring). A member that runs
 * another version than this node is logged once per change (its own, or this node's), and
 * counted by ringlimit_policy_version_mismatch while it is on the ring. Only the members'
 * words are kept here; nothing is decided by them: each key's owner applies the policy it
 * holds.
 */
export class PolicyVersions {
  private readonly versions = new Map<string, string>();

  constructor(
    /** this node's policy version, now */
    private readonly own: () => string,
    private readonly logger: Logger,
  ) {}

  /** `member` told `version` (its first heartbeat on a connection, or a change). */
  note(member: string, version: string): void {
    const before = this.versions.get(member);
    if (before === version) return;
    if (before === undefined && this.versions.size >= MAX_MEMBERS) this.versions.clear();
    this.versions.set(member, version);
    const ours = this.own();
    if (version !== ours) this.logger.warn({ peer: member, version, ours }, `member ${member} runs policy ${version}, this node ${ours}`);
    else if (before !== undefined && before !== ours) this.logger.info({ peer: member, version }, `member ${member} runs this node's policy ${version} again`);
  }

  /** This node's policy changed: the members it now differs from, logged once. */
  ownChanged(members: readonly string[], self: string): void {
    const ours = this.own();
    const differing = members.filter((m) => m !== self && this.versions.has(m) && this.versions.get(m) !== ours);
    if (differing.length > 0) this.logger.warn({ version: ours, differing }, `this node now runs policy ${ours}; ${differing.length} member(s) run another`);
  }

  /** What `member` last told; this node's own for itself; null when not heard yet. */
  versionOf(member: string, self: string): string | null {
    if (member === self) return this.own();
    return this.versions.get(member) ?? null;
  }

  /** Members among `members` (the ring) whose last told version differs from this node's. */
  mismatches(members: readonly string[], self: string): number {
    const ours = this.own();
    let n = 0;
    for (const m of members) {
      if (m === self) continue;
      const v = this.versions.get(m);
      if (v !== undefined && v !== ours) n++;
    }
    return n;
  }
}
