/** The key's reference in the table's `keys` array (a pointer: Node's x64 builds use no pointer compression). */
export const KEY_REF_BYTES = 8;
/** V8 string header (map, hash field, length); heap objects are 8-byte aligned. */
const STRING_HEADER_BYTES = 16;

/** The smallest byte bound a table accepts: room for the initial arrays and index and a few maximal keys. */
export const MIN_BYTES = 1024 * 1024;

/**
 * What V8 allocates for a flat string: a 16-byte header, then one byte per character when
 * every character is below U+0100, else two; rounded up to 8. Scans the key once, on insert.
 */
export function stringBytes(key: string): number {
  let perChar = 1;
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0xff) {
      perChar = 2;
      break;
    }
  }
  return (STRING_HEADER_BYTES + key.length * perChar + 7) & ~7;
}
