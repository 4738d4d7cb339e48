import { request, TEST_KEY } from "../harness/http-client.js";
import { sleep } from "../harness/wait.js";
import type { LimitKey, Sample } from "./load.js";

/**
 * Token-budget charges through a fault (issue 29: POST /limit/charge on the ring, exactly
 * once). A charge is counted on its key's owner whatever remains (debt), and never fails
 * open: its answer is 200 (counted: `count` says where the key stands) or 503 (the owner did
 * not answer in time: not counted, or counted once by an owner that answered too late;
 * docs/api.md). Never twice. The suite checks that from the owner's count at the end.
 */

/** Each charge weighs this much; 8 charges a second per key put a budget of 2,048 in debt within 7 s. */
export const CHARGE_COST = 37;
export const CHARGE_RATE_PER_S = 24;
const CHARGE_LIMIT = 2048;

/**
 * One budget per node, owned by it (a fault meets each of them from another side), of
 * limit 2,048 (shares apply to the key; a charge never takes one), in a window of 30 to 60
 * minutes that has at least 4 minutes left: the whole row and its reading fall in one window.
 */
export function chargeKeys(tag: string, ownerOf: (identifier: string) => number, nodes: number): LimitKey[] {
  const nowS = Date.now() / 1000;
  let durationS = 3600;
  while (durationS - (nowS % durationS) < 240) durationS--;
  return Array.from({ length: nodes }, (_, owner) => {
    let i = 0;
    while (ownerOf(`${tag}-c${owner}-${i}`) !== owner) i++;
    return { identifier: `${tag}-c${owner}-${i}`, algorithm: "fixed-window", limit: CHARGE_LIMIT, durationS, cost: CHARGE_COST, charge: true };
  });
}

/** What the charges of one row came to, in units of the budget. */
export interface ChargeTally {
  charges: number;
  /** answered 200: counted */
  counted: number;
  /** answered 503: not counted, or counted once late (never twice) */
  refused: number;
  /** no answer at the client (time-out): either */
  unknown: number;
  /** answers other than 200 and 503 */
  unexpected: number;
  /** the owners' counts at the end, summed over the keys; undefined when one could not be read */
  final: number | undefined;
  /** charges answered 200 missing from the final counts */
  lost: number;
  /** the same per key (chargeKeys: key i is owned by node i) */
  lostPerKey: number[];
  /** charges answered 503 or not answered that the final counts hold (counted once, late) */
  countedUnanswered: number;
  /** beyond every charge sent: counted twice */
  twice: number;
  /** the deepest debt a 200 reported */
  deepestDebt: number;
}

/**
 * The owner's count of a budget that shares answer reads `charged + holders × share`: the
 * shares it holds back for the members that may answer the key are counted as used from the
 * window's start (docs/shares.md), and a charge's `count` and `debt` include them. The costs
 * (CHARGE_COST, prime to the share of 16, and the reads' 1s, taken off first) are multiples of
 * 37, so the holders are read off the residue: 16 × h ≡ count (mod 37), h = 7 × count mod 37.
 */
const SHARE = CHARGE_LIMIT / 128;
export function chargedOf(count: number): { charged: number; holders: number } | undefined {
  const holders = (((7 * count) % CHARGE_COST) + CHARGE_COST) % CHARGE_COST;
  // An owner holds back for fewer than 15 members (share-rule.ts): anything else is not a count of these charges.
  return holders < 15 && count - holders * SHARE >= 0 ? { charged: count - holders * SHARE, holders } : undefined;
}

/**
 * The charges each key's owner holds once the ring has settled: read by a charge of 1 sent to
 * the owner itself (decided there, no forward), less the reads before it. Read every second
 * until three reads agree (strays and split-brain copies merge into the owner after the heal)
 * or `maxMs` has passed.
 */
export async function readCharged(
  urls: readonly string[],
  keys: readonly LimitKey[],
  ownerOf: (identifier: string) => number,
  maxMs = 15_000,
): Promise<(number | undefined)[]> {
  return Promise.all(
    keys.map(async (key) => {
      const seen: number[] = [];
      const started = Date.now();
      let reads = 0;
      while (Date.now() - started < maxMs) {
        const body = JSON.stringify({
          namespace: "faults",
          identifier: key.identifier,
          limit: key.limit,
          duration: key.durationS,
          algorithm: key.algorithm,
          cost: 1,
        });
        try {
          const r = await request(urls[ownerOf(key.identifier)]! + "/limit/charge", {
            method: "POST",
            headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
            body,
            timeoutMs: 3000,
          });
          if (r.status === 200 && typeof r.json?.data?.count === "number") {
            reads++;
            const read = chargedOf(r.json.data.count - reads);
            if (read !== undefined) seen.push(read.charged);
            if (seen.length >= 3 && seen.slice(-3).every((c) => c === seen[seen.length - 1])) break;
          }
        } catch {
          /* read again */
        }
        await sleep(1000);
      }
      return seen[seen.length - 1];
    }),
  );
}

export function tallyCharges(samples: readonly Sample[], keys: readonly LimitKey[], finals: readonly (number | undefined)[]): ChargeTally {
  const t: ChargeTally = {
    charges: 0,
    counted: 0,
    refused: 0,
    unknown: 0,
    unexpected: 0,
    final: 0,
    lost: 0,
    lostPerKey: keys.map(() => 0),
    countedUnanswered: 0,
    twice: 0,
    deepestDebt: 0,
  };
  const perKey = keys.map(() => ({ counted: 0, unanswered: 0 }));
  for (const s of samples) {
    const key = keys[s.key]!;
    const cost = key.cost ?? 1;
    t.charges++;
    if (s.status === 200) {
      t.counted += cost;
      perKey[s.key]!.counted += cost;
      t.deepestDebt = Math.max(t.deepestDebt, (s.count ?? 0) - key.limit);
    } else if (s.status === 503 || s.status === 0) {
      if (s.status === 503) t.refused += cost;
      else t.unknown += cost;
      perKey[s.key]!.unanswered += cost;
    } else t.unexpected++;
  }
  keys.forEach((_, k) => {
    const final = finals[k];
    if (final === undefined || t.final === undefined) {
      t.final = undefined;
      return;
    }
    t.final += final;
    const { counted, unanswered } = perKey[k]!;
    t.lostPerKey[k] = Math.max(0, counted - final);
    t.lost += t.lostPerKey[k]!;
    t.countedUnanswered += Math.max(0, Math.min(final, counted + unanswered) - counted);
    t.twice += Math.max(0, final - counted - unanswered);
  });
  return t;
}

export function chargeNote(c: ChargeTally): string {
  const units = (n: number) => `${n / CHARGE_COST}`;
  return (
    `charges of ${CHARGE_COST} to 3 budgets of 2,048 (one per owner): ${c.charges} sent, ${units(c.counted)} answered 200 (debt up to ${c.deepestDebt}), ` +
    `${units(c.refused)} answered 503, ${units(c.unknown)} unanswered; at the end the owners hold ` +
    (c.final === undefined
      ? "(not read)"
      : `${units(c.final)}: ${units(c.lost)} of the 200s lost${c.lost > 0 ? ` (budgets of n1/n2/n3: ${c.lostPerKey.map(units).join("/")})` : ""}, ${units(c.countedUnanswered)} of the 503s/unanswered counted once, ${units(c.twice)} counted twice`)
  );
}
