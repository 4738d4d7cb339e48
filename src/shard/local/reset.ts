import { ALGORITHMS, algorithmByCode, type Algorithm } from "../../algorithms/index.js";
import type { RemovedState } from "../../decision.js";
import { parseStateKey, stateKeyOf } from "../ring/state-key.js";
import type { StateTable } from "../table/state-table.js";

/**
 * Remove the states of one identifier (its ring key): the one named by algorithm and
 * duration, or all of those that match what was given. Without a duration the table's
 * known durations are looked up, key by key; only a table that has seen thousands of
 * distinct durations is scanned.
 *
 * The reset is remembered for RESET_MEMORY_MS (StateTable.noteReset): states of the
 * identifier that another node counted before it and hands over meanwhile are dropped.
 * The states go as changes (StateTable.remove): replication sends their removal to the
 * replicas (cluster/replicator.ts), so a replica promoted later does not bring them back.
 */
export function resetOn(table: StateTable, ringKey: string, algorithm: Algorithm | undefined, duration: number | undefined, now: number): RemovedState[] {
  // Remembered first: a state of this identifier handed over from elsewhere is not merged back.
  table.noteReset(ringKey, now);
  const removed: RemovedState[] = [];
  const algorithms = algorithm !== undefined ? [algorithm] : ALGORITHMS;
  const durations = duration !== undefined ? [duration] : table.knownDurations();
  if (durations !== undefined) {
    for (const a of algorithms) {
      for (const d of durations) if (table.remove(stateKeyOf(a.code, d, ringKey))) removed.push({ algorithm: a.name, duration: d });
    }
    return removed;
  }
  const due: string[] = [];
  table.forEach((key) => {
    if (!key.endsWith(ringKey)) return;
    const parsed = parseStateKey(key);
    if (parsed !== undefined && parsed.ringKey === ringKey && (algorithm === undefined || parsed.algorithmCode === algorithm.code)) due.push(key);
  });
  for (const key of due) {
    const parsed = parseStateKey(key)!;
    table.remove(key);
    removed.push({ algorithm: algorithmByCode(parsed.algorithmCode)!.name, duration: parsed.duration });
  }
  return removed;
}
