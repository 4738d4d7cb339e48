/**
 * The wait before reconnection `attempt` (0 for the first after a loss): `initialMs` doubled
 * per attempt up to `maxMs`, then spread by ±50 % so that the replicas of a Deployment do not
 * all knock on a restarted management server in the same millisecond. Pure: `random` in [0, 1).
 */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number, random: number): number {
  const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.max(1, Math.min(maxMs, Math.round(base * (0.5 + random))));
}
