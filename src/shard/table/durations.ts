/** Distinct durations remembered for resets; past this, a reset of every state of an identifier scans the table. */
const MAX_TRACKED_DURATIONS = 4096;

/**
 * Every duration (seconds) a stored state has had, so that removing all the states of one
 * identifier looks up (algorithm × duration) keys instead of scanning. Callers use a handful
 * of durations; `known` is undefined once more than MAX_TRACKED_DURATIONS were seen.
 */
export class DurationSet {
  known: Set<number> | undefined = new Set();

  note(duration: number | undefined): void {
    const seen = this.known;
    if (seen === undefined || duration === undefined || seen.has(duration)) return;
    if (seen.size >= MAX_TRACKED_DURATIONS) this.known = undefined;
    else seen.add(duration);
  }
}
