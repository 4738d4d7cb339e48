import { algorithmByCode, type Algorithm } from "../../algorithms/index.js";
import type { RemovedState } from "../../decision.js";
import { parseStateKey, stateKeyOf } from "../ring/state-key.js";
import type { StateTable } from "../table/state-table.js";

/**
 * Remove the states of one identifier (its ring key): the one named by algorithm and
 * duration, or all of those that match what was given, found through the table's
 * identifier index: the cost is bounded by the states the identifier has, whatever else
 * the table holds or has seen (ResetQueue spreads many resets over turns).
 *
 * The reset is remembered for RESET_MEMORY_MS (StateTable.noteReset): states of the
 * identifier that another node counted before it and hands over meanwhile are dropped.
 * The states go as changes (StateTable.remove): replication sends their removal to the
 * replicas (cluster/replicator.ts), so a replica promoted later does not bring them back.
 */
export function resetOn(table: StateTable, ringKey: string, algorithm: Algorithm | undefined, duration: number | undefined, now: number): RemovedState[] {
  // Remembered first: a state of this identifier handed over from elsewhere is not merged back.
  table.noteReset(ringKey, now);
  if (algorithm !== undefined && duration !== undefined) {
    return table.remove(stateKeyOf(algorithm.code, duration, ringKey)) ? [{ algorithm: algorithm.name, duration }] : [];
  }
  const removed: (RemovedState & { code: number })[] = [];
  for (const key of table.keysOf(ringKey)) {
    const parsed = parseStateKey(key);
    if (parsed === undefined) continue;
    if ((algorithm !== undefined && parsed.algorithmCode !== algorithm.code) || (duration !== undefined && parsed.duration !== duration)) continue;
    table.remove(key);
    removed.push({ algorithm: algorithmByCode(parsed.algorithmCode)!.name, duration: parsed.duration, code: parsed.algorithmCode });
  }
  // In the order of the algorithms' codes, then durations: the same answer whatever order the states were made in.
  removed.sort((x, y) => x.code - y.code || x.duration - y.duration);
  return removed.map(({ algorithm, duration }) => ({ algorithm, duration }));
}
