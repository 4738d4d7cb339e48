/** How many random slots an eviction looks at (as Redis samples rather than keeping an order). */
export const EVICTION_SAMPLES = 8;

/**
 * Which of `count` slots to evict: among EVICTION_SAMPLES random ones, the state whose loss
 * matters least. A state already past its expiry (second <= expiredBy) loses nothing; then
 * the fewest counted requests (`weight`: a nearly fresh state), then the earliest expiry.
 *
 * The earliest expiry alone let a flood of fresh keys with long windows free a blocked
 * victim's counter within a few thousand inserts (bench/eviction-flood.mjs); by weight, fresh
 * keys are evicted among themselves, and a victim goes only to states that counted as much.
 * `random` returns [0, 1) (Math.random in the table; tests may pass their own).
 */
export function sampleVictim(count: number, expiry: Uint32Array, weight: Uint32Array, expiredBy: number, random: () => number): number {
  let victim = -1;
  let victimWeight = Infinity;
  let victimExpiry = Infinity;
  for (let i = 0; i < EVICTION_SAMPLES; i++) {
    const slot = (random() * count) | 0;
    const expires = expiry[slot]!;
    const w = expires <= expiredBy ? 0 : weight[slot]!;
    if (w < victimWeight || (w === victimWeight && expires < victimExpiry)) {
      victim = slot;
      victimWeight = w;
      victimExpiry = expires;
    }
  }
  return victim;
}
