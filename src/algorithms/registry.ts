import { fixedWindow } from "./fixed-window.js";
import { leakyBucket } from "./leaky-bucket.js";
import { slidingWindow } from "./sliding-window.js";
import { tokenBucket } from "./token-bucket.js";
import type { Algorithm, AlgorithmName } from "./types.js";

export const DEFAULT_ALGORITHM: AlgorithmName = "fixed-window";

/** Indexed by `Algorithm.code`, which is also the peer-wire and hand-off encoding. */
export const ALGORITHMS: readonly Algorithm[] = Object.freeze([fixedWindow, slidingWindow, tokenBucket, leakyBucket]);

const byName = new Map<string, Algorithm>(ALGORITHMS.map((a) => [a.name, a]));

export function algorithmByName(name: string): Algorithm | undefined {
  return byName.get(name);
}

export function algorithmByCode(code: number): Algorithm | undefined {
  return ALGORITHMS[code];
}
