/**
 * A compiled policy crosses from the compile worker (compile-worker.ts) to the event loop
 * as a structured clone, which keeps Maps, arrays, typed arrays and shared references but
 * not classes: each class of a compiled policy carries its name in BRAND, and revive()
 * gives every such object its class back in one walk of the copy. This is the whole cost
 * the event loop pays for a new policy (docs/security.md gives the figures).
 */
export const BRAND = "$class";

/** Gives each object of `root` whose BRAND names one of `classes` that class's prototype, in place. */
export function revive(root: unknown, classes: Readonly<Record<string, { prototype: object }>>): void {
  const seen = new Set<object>();
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null || seen.has(value) || ArrayBuffer.isView(value)) continue;
    seen.add(value);
    if (value instanceof Map) {
      for (const [k, v] of value) stack.push(k, v);
      continue;
    }
    if (Array.isArray(value)) {
      for (const v of value) stack.push(v);
      continue;
    }
    const record = value as Record<string, unknown>;
    const brand = record[BRAND];
    if (typeof brand === "string" && Object.hasOwn(classes, brand)) Object.setPrototypeOf(value, classes[brand]!.prototype);
    for (const key in record) stack.push(record[key]);
  }
}
