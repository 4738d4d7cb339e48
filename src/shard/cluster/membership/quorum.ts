import type { Logger } from "../../../logger.js";

/** While a node lacks a quorum, the warning is repeated at most this often. */
const QUORUM_LOG_INTERVAL_MS = 10_000;
/**
 * Below this many voting members, readiness does not follow the quorum: with two, a node
 * cannot tell its peer's crash from a partition, and two unready halves would take the
 * whole service out of a load balancer for a single crash.
 */
export const MIN_MEMBERS_FOR_QUORUM = 3;

/**
 * Whether this node sees a majority of the configured members. A node cut off with a
 * minority still answers (failing open for keys it cannot reach, deciding the rest on
 * counts the majority never sees), so it says so: /ready turns 503 and
 * `ringlimit_cluster_quorum` 0, and a readiness-aware load balancer or a ring-aware client
 * sends its traffic to the majority instead.
 *
 * `voters` leaves out members that announced a graceful leave, so a rolling restart never
 * costs the quorum.
 */
export function hasQuorum(seen: number, voters: number): boolean {
  return seen * 2 > voters;
}

/** Logs quorum lost and regained, and repeats "still lost" at most every QUORUM_LOG_INTERVAL_MS. */
export class QuorumLog {
  private lastQuorum = true;
  private lastLogAt = -Infinity;

  constructor(private readonly logger: Logger) {}

  /** `hadQuorum`: whether this node has seen a quorum since it started (until then it is not ready, see Cluster.ready). */
  update(quorum: boolean, seen: number, voters: number, now: number, hadQuorum = true): void {
    const changed = quorum !== this.lastQuorum;
    this.lastQuorum = quorum;
    if (quorum) {
      if (changed) this.logger.info({ seen, voters }, "cluster quorum regained: this node sees a majority of the members again");
      return;
    }
    if (!changed && now - this.lastLogAt < QUORUM_LOG_INTERVAL_MS) return;
    this.lastLogAt = now;
    this.logger.warn(
      { seen, voters },
      !hadQuorum
        ? "no cluster quorum yet: this node has not reached and authenticated with a majority of the members since it started; with PEERS, /ready is 503 until it has"
        : voters >= MIN_MEMBERS_FOR_QUORUM
          ? "no cluster quorum: this node sees fewer than a majority of the members; /ready is 503 until it does"
          : "no cluster quorum: this node sees fewer than a majority of the members (with fewer than 3 members it stays ready)",
    );
  }
}
