/** The typed arrays the table's per-slot columns are made of. */
type SlotColumn = Float64Array | Uint32Array | Int32Array;

/** A copy of `column` in a new array of its type with `capacity` slots (the new ones 0), for a table that grows. */
export function widened<T extends SlotColumn>(column: T, capacity: number): T {
  const wider = new (column.constructor as new (length: number) => T)(capacity);
  wider.set(column);
  return wider;
}
