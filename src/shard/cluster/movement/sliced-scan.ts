import type { StateTable } from "../../table/state-table.js";

/**
 * Keys visited per event-loop turn by a pass over a whole table (a hand-off, a replica
 * resync): keeps a 1 M-key pass from stalling answers.
 */
export const SCAN_SLICE = 20_000;

/**
 * Visit the keys `table` holds now, SCAN_SLICE per event-loop turn. They are listed in one
 * synchronous step first, so a key deleted before its slice comes is still visited (the
 * visitor looks its state up). `visit` returns false to end the pass; so does the result.
 */
export async function forEachKeySliced(table: StateTable, visit: (keys: readonly string[]) => boolean | void): Promise<boolean> {
  const keys: string[] = [];
  table.forEach((key) => keys.push(key));
  for (let i = 0; i < keys.length; i += SCAN_SLICE) {
    if (i > 0) await new Promise<void>((r) => setImmediate(r));
    if (visit(keys.slice(i, i + SCAN_SLICE)) === false) return false;
  }
  return true;
}
