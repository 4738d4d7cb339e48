import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Over, Tally } from "./tally.js";

/** One row of the fault table. */
export interface FaultRow {
  /** position in the table (the three suite files run in parallel) */
  order: number;
  fault: string;
  tally: Tally;
  notes: string[];
}

// dist/test/faults/report.js → dist/faults/: build output, not committed (docs/faults.md keeps a dated copy).
const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../faults");
const ROWS = path.join(DIR, "rows");

export function saveRow(row: FaultRow): void {
  mkdirSync(ROWS, { recursive: true });
  writeFileSync(path.join(ROWS, `${String(row.order).padStart(2, "0")}.json`), JSON.stringify(row, null, 1));
}

export function loadRows(): FaultRow[] {
  let files: string[] = [];
  try {
    files = readdirSync(ROWS).filter((f) => f.endsWith(".json"));
  } catch {
    return [];
  }
  return files
    .sort()
    .map((f) => JSON.parse(readFileSync(path.join(ROWS, f), "utf8")) as FaultRow)
    .sort((a, b) => a.order - b.order);
}

function overCell(t: Tally, undegraded: boolean): string {
  const part = (name: string, x: Over) => {
    const [over, worst] = undegraded ? [x.undegraded, x.worstUndegraded] : [x.overAdmitted, x.worst];
    return over === 0 ? `${name} 0` : `${name} ${over} (+${worst})`;
  };
  // Rows saved before the undegraded figures existed, or without token buckets, show what they have.
  if (undegraded && t.fixedWindow.undegraded === undefined) return "";
  const parts = [part("FW", t.fixedWindow)];
  if (t.keys === undefined || t.keys.tokenBucket > 0) parts.push(part("TB", t.tokenBucket));
  return parts.join(" · ");
}

export function renderTable(rows: readonly FaultRow[]): string {
  const lines = ["| fault | over-admitted beyond the limit (worst key) | of which undegraded | degraded | notes |", "|---|---|---|---|---|"];
  for (const r of rows) {
    const notes = [...r.notes];
    if (r.tally.countedWithoutExactAnswer > 0) notes.push(`${r.tally.countedWithoutExactAnswer} counted by an owner though answered degraded`);
    if (r.tally.unexpected + r.tally.failures > 0) notes.push(`${r.tally.unexpected} non-200/429, ${r.tally.failures} client failures`);
    lines.push(`| ${r.fault} | ${overCell(r.tally, false)} | ${overCell(r.tally, true)} | ${r.tally.degraded} of ${r.tally.requests} | ${notes.join("; ")} |`);
  }
  return lines.join("\n") + "\n";
}

/** `node dist/test/faults/report.js`: the table of the last run, also written to dist/faults/table.md. */
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const table = renderTable(loadRows());
  writeFileSync(path.join(DIR, "table.md"), table);
  process.stdout.write(table);
}
