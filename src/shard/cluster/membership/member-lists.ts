import { createHash } from "node:crypto";

/** A request tag ending so says the client reads the relation a reply tag carries (older clients compare tags whole). */
const READS_RELATION = "+";
/** A reply tag ending so says the server's list is the client's plus members the client does not list. */
const LISTS_MORE = ">";
/** Lists up to this long also match with two members left out (n(n-1)/2 digests, once per list). */
const MAX_MEMBERS_FOR_PAIRS = 64;

/** A member list's digest as the members tell it (16 hex digits of SHA-256 over the sorted names). */
export function listDigest(members: readonly string[]): string {
  return createHash("sha256")
    .update([...members].sort().join(","))
    .digest("hex")
    .slice(0, 16);
}

/** How a member's static list stands to this node's. */
export type ListRelation = "same" | "lacks" | "more" | "other";

/**
 * The static member lists (PEERS) of the members this node reaches, as far as their digests
 * tell. While an operator edits PEERS node by node, two lists run at once, one a member or two
 * longer than the other. The ring every node builds is this node's list less whatever a member
 * it reaches does not list: so an old list's holders and a new list's holders build the same
 * ring (the members both lists share), a node that only one list names forwards every key and
 * owns none until every member it reaches lists it, and no key has two owners. Before, two
 * members given different lists kept each other out of their rings, and a node was ready only
 * with a majority of its own list: during a rollout of 4 -> 3 there were moments when no
 * group had one, and no decision was counted for ~4 s.
 *
 * A member's list is known by digest only (the tag rides the link's PROTOCOL_CALL, 64 bytes at
 * most): a list shorter than this node's by one or two members matches one of the digests
 * computed here, and a longer one is told by its holder, which saw this node's digest in the
 * request and found it among its own shorter ones (LISTS_MORE). Any other list ("other":
 * edited in more than two places at once, or an older release's tag) keeps its member out of
 * the ring as before (MemberPool.apart).
 */
export class MemberLists {
  /** this node's list digest; "" with PEERS_DNS (no lists compared) */
  digest = "";
  /** digests of this node's list with one or two members left out, and which */
  private readonly shorter = new Map<string, readonly string[]>();
  /** members up whose lists leave out some of this node's: which (only while they are up) */
  private readonly lacking = new Map<string, readonly string[]>();
  /** members up whose lists cannot be told from their digests: kept out of the ring */
  readonly other = new Set<string>();

  /** This node's static list (its own name included). */
  setOwn(members: readonly string[]): void {
    this.digest = listDigest(members);
    this.shorter.clear();
    const sorted = [...members].sort();
    for (let i = 0; i < sorted.length; i++) {
      this.shorter.set(listDigest(sorted.filter((_, k) => k !== i)), [sorted[i]!]);
      if (sorted.length > MAX_MEMBERS_FOR_PAIRS) continue;
      for (let j = i + 1; j < sorted.length; j++) this.shorter.set(listDigest(sorted.filter((_, k) => k !== i && k !== j)), [sorted[i]!, sorted[j]!]);
    }
  }

  /** What this node's client tells in its PROTOCOL_CALL. */
  get requestTag(): string {
    return this.digest === "" ? "" : this.digest + READS_RELATION;
  }

  /** What this node's server answers a PROTOCOL_CALL whose tag is `asked`: an older client gets the bare digest it compares. */
  replyTo(asked: string): string {
    if (this.digest === "" || !asked.endsWith(READS_RELATION)) return this.digest;
    return this.shorter.has(asked.slice(0, -READS_RELATION.length)) ? this.digest + LISTS_MORE : this.digest;
  }

  /** `member` came up and its reply told `tag` ("" from a node with PEERS_DNS, or one of a release before tags). */
  linked(member: string, tag: string): ListRelation {
    this.lacking.delete(member);
    this.other.delete(member);
    if (this.digest === "" || tag === "") return "same";
    const more = tag.endsWith(LISTS_MORE);
    const digest = more ? tag.slice(0, -LISTS_MORE.length) : tag;
    if (digest === this.digest) return "same";
    if (more) return "more";
    const left = this.shorter.get(digest);
    if (left !== undefined) {
      this.lacking.set(member, left);
      return "lacks";
    }
    this.other.add(member);
    return "other";
  }

  /** `member` is down or no longer configured: its list no longer shapes the ring. */
  forget(member: string): void {
    this.lacking.delete(member);
    this.other.delete(member);
  }

  /** Members of this node's list that some member up does not list: left out of the ring (this node's own name among them, possibly). */
  excluded(): Set<string> {
    const out = new Set<string>();
    for (const left of this.lacking.values()) for (const m of left) out.add(m);
    return out;
  }
}
