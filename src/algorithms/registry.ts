import { concurrency } from "./concurrency.js";
import { fixedWindow } from "./fixed-window.js";
import { leakyBucket } from "./leaky-bucket.js";
import { slidingWindow } from "./sliding-window.js";
import { tokenBucket } from "./token-bucket.js";
import type { Algorithm } from "./types.js";

/**
 * The algorithms this service offers, in code order: the one list. Adding an algorithm is
 * its file and a line here. Everything else asks this registry: the request contract and
 * its 400 message, the peer wire (which carries the code), the checks and clocks of
 * hand-off, replica and snapshot records, resets, metrics and the ring-aware client.
 */
const OFFERED = [fixedWindow, slidingWindow, tokenBucket, leakyBucket, concurrency] as const;

export type AlgorithmName = (typeof OFFERED)[number]["name"];

/** What a request may name (docs/api.md), in code order. */
export const ALGORITHM_NAMES: readonly AlgorithmName[] = Object.freeze(OFFERED.map((a) => a.name));

export const DEFAULT_ALGORITHM: AlgorithmName = "fixed-window";

const registered: Algorithm[] = [];
const byName = new Map<string, Algorithm>();

/** Every registered algorithm, indexed by `Algorithm.code`. */
export const ALGORITHMS: readonly Algorithm[] = registered;

export function algorithmByName(name: string): Algorithm | undefined {
  return byName.get(name);
}

export function algorithmByCode(code: number): Algorithm | undefined {
  return registered[code];
}

/** A state key holds the code as one digit (shard/ring/state-key.ts). */
const MAX_CODE = 9;

function register(algorithm: Algorithm): void {
  if (algorithm.code !== registered.length || algorithm.code > MAX_CODE) {
    throw new RangeError(`algorithm ${algorithm.name}: code ${algorithm.code}, expected the next free one, ${registered.length} (at most ${MAX_CODE})`);
  }
  if (byName.has(algorithm.name)) throw new RangeError(`algorithm ${algorithm.name} is registered already`);
  registered.push(algorithm);
  byName.set(algorithm.name, algorithm);
}

for (const algorithm of OFFERED) register(algorithm);

/**
 * For tests only (test/architecture.test.ts keeps every file of src/ from calling it): add
 * an algorithm at the next code, as a line in OFFERED would, to show that the peer wire,
 * hand-off, replicas and snapshots take it without another change. It is not offered to
 * callers: ALGORITHM_NAMES, and so the request contract, stay the list above.
 */
export function registerForTest(algorithm: Algorithm): void {
  register(algorithm);
}
