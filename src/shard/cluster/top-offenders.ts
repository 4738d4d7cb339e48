import { byCount, type TopBlocked, type TopEntry } from "../top/top-blocked.js";
import type { PeerClient } from "../../peer/index.js";
import { CallMethod } from "./wire/call-methods.js";
import { decodeTopReply, encodeTopReply, encodeTopRequest, MAX_TOP_ENTRIES, type TopRequest } from "./wire/top-wire.js";

/** What GET /top answers: the merged entries, and how many members were asked and answered. */
export interface TopAnswer {
  entries: TopEntry[];
  members: number;
  answered: number;
}

/**
 * Each member is asked for this many times `n` (at most MAX_TOP_ENTRIES): an identifier
 * blocked on several members may be below one member's top n and still in the ring's.
 */
const MARGIN = 4;

/** Whether `namespace` is one the request may see: its namespace, within the key's prefixes. */
export function admitsOf(q: TopRequest): (namespace: string) => boolean {
  return (namespace) => (q.namespace === undefined || namespace === q.namespace) && (q.prefixes === null || q.prefixes.some((p) => namespace.startsWith(p)));
}

/** A member's TOP call (decoded by its row in wire/call-methods.ts): this node's summary, filtered as asked. */
export function answerTop(q: TopRequest, summary: TopBlocked): Buffer {
  return encodeTopReply(summary.top(q.n, admitsOf(q)));
}

/**
 * GET /top across the ring: this node's summary and every other member's (a TOP call each,
 * in parallel), counts and errors of one (namespace, identifier) added, the largest `n`
 * kept. A member that fails or is late is left out (`answered` says how many made it).
 */
export async function topAcrossRing(
  q: TopRequest,
  summary: TopBlocked,
  members: readonly string[],
  self: string,
  client: (member: string) => PeerClient | undefined,
  timeoutMs: number,
): Promise<TopAnswer> {
  const asked: TopRequest = { ...q, n: Math.min(MAX_TOP_ENTRIES, q.n * MARGIN) };
  const payload = encodeTopRequest(asked);
  const others = members.filter((m) => m !== self);
  const replies = await Promise.all(
    others.map((m) => {
      const c = client(m);
      if (c === undefined) return Promise.resolve(undefined);
      return c.call(CallMethod.TOP, payload, timeoutMs).then(
        (reply) => {
          try {
            return decodeTopReply(reply, asked.n);
          } catch {
            return undefined;
          }
        },
        () => undefined,
      );
    }),
  );
  const merged = new Map<string, TopEntry>();
  const add = (e: TopEntry) => {
    const key = e.namespace.length + ":" + e.namespace + e.identifier;
    const found = merged.get(key);
    if (found === undefined) merged.set(key, { ...e });
    else {
      found.count += e.count;
      found.error += e.error;
    }
  };
  for (const e of summary.top(asked.n, admitsOf(q))) add(e);
  let answered = 1;
  for (const r of replies) {
    if (r === undefined) continue;
    answered++;
    for (const e of r) add(e);
  }
  return { entries: [...merged.values()].sort(byCount).slice(0, q.n), members: others.length + 1, answered };
}
