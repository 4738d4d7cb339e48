import { STATIC_TABLE } from "./hpack-static.js";
import { HuffmanError, huffmanDecode } from "./huffman.js";

/** A header block the decoder cannot read: a connection error COMPRESSION_ERROR (RFC 7540 §4.3). */
export class CompressionError extends Error {
  override name = "CompressionError";
}

/** RFC 7541 §4.1: an entry's size is its name's and value's octets plus 32. */
const ENTRY_OVERHEAD = 32;
/** The largest table (SETTINGS_HEADER_TABLE_SIZE) this decoder accepts; we announce the default 4096. */
export const HEADER_TABLE_SIZE = 4096;
/** an entry costs at least 32: the table never holds more */
const MAX_ENTRIES = HEADER_TABLE_SIZE / ENTRY_OVERHEAD;

/** Called per decoded field; `size` is the field's RFC 7541 size (name + value + 32). */
export type OnField = (name: string, value: string) => void;

/**
 * The request-header decoder of RFC 7541: static and dynamic tables, Huffman strings,
 * dynamic table size updates. One per connection; every header block of the connection must
 * pass through it in order, refused streams' too, or the tables of both ends drift apart.
 * Strings are latin1 (a header is bytes; gRPC's are ASCII).
 */
export class HpackDecoder {
  /** the dynamic table as a ring: newest at `head - 1` */
  private readonly names: string[] = new Array<string>(MAX_ENTRIES);
  private readonly values: string[] = new Array<string>(MAX_ENTRIES);
  private head = 0;
  private count = 0;
  private size = 0;
  private maxSize: number;
  private scratch = Buffer.allocUnsafe(256);

  /** `maxSize`: the SETTINGS_HEADER_TABLE_SIZE announced (we announce the default). */
  constructor(private readonly settingsMax = HEADER_TABLE_SIZE) {
    this.maxSize = settingsMax;
  }

  /**
   * Decodes `block[start, end)`, calling `onField` per field, and returns the header list's
   * size (RFC 7540 §6.5.2: name + value + 32 per field). Throws CompressionError.
   */
  decode(block: Buffer, start: number, end: number, onField: OnField): number {
    let p = start;
    let listSize = 0;
    let fieldSeen = false;
    while (p < end) {
      const b = block[p]!;
      let name: string;
      let value: string;
      if (b & 0x80) {
        // indexed field
        const index = this.integer(block, p, end, 7);
        p = this.next;
        if (index === 0) throw new CompressionError("index 0");
        name = this.nameAt(index);
        value = this.valueAt(index);
      } else if ((b & 0xe0) === 0x20) {
        // dynamic table size update: only before the first field of a block (§4.2)
        if (fieldSeen) throw new CompressionError("table size update after a field");
        const size = this.integer(block, p, end, 5);
        p = this.next;
        if (size > this.settingsMax) throw new CompressionError("table size above SETTINGS_HEADER_TABLE_SIZE");
        this.maxSize = size;
        this.evict(0);
        continue;
      } else {
        // literal: with incremental indexing (01), without (0000) or never indexed (0001)
        const indexing = (b & 0xc0) === 0x40;
        const index = this.integer(block, p, end, indexing ? 6 : 4);
        p = this.next;
        if (index === 0) {
          name = this.string(block, p, end);
          p = this.next;
        } else name = this.nameAt(index);
        value = this.string(block, p, end);
        p = this.next;
        if (indexing) this.insert(name, value);
      }
      fieldSeen = true;
      listSize += name.length + value.length + ENTRY_OVERHEAD;
      onField(name, value);
    }
    return listSize;
  }

  /** where the last integer or string read ended */
  private next = 0;

  /** RFC 7541 §5.1: an integer with an N-bit prefix; bounded to 2^28 (no field or index is near it). */
  private integer(src: Uint8Array, p: number, end: number, prefixBits: number): number {
    const mask = (1 << prefixBits) - 1;
    let value = src[p]! & mask;
    p++;
    if (value === mask) {
      let shift = 0;
      for (;;) {
        if (p >= end) throw new CompressionError("truncated integer");
        const b = src[p++]!;
        value += (b & 0x7f) * 2 ** shift;
        if ((b & 0x80) === 0) break;
        shift += 7;
        if (shift > 21) throw new CompressionError("integer too large");
      }
    }
    this.next = p;
    return value;
  }

  /** RFC 7541 §5.2: a string literal, raw or Huffman-coded. */
  private string(src: Buffer, p: number, end: number): string {
    if (p >= end) throw new CompressionError("truncated string");
    const huffman = (src[p]! & 0x80) !== 0;
    const length = this.integer(src, p, end, 7);
    p = this.next;
    if (length > end - p) throw new CompressionError("string past the block");
    this.next = p + length;
    if (!huffman) return src.toString("latin1", p, p + length);
    const need = Math.ceil((length * 8) / 5);
    if (this.scratch.length < need) this.scratch = Buffer.allocUnsafe(need);
    try {
      const n = huffmanDecode(src, p, p + length, this.scratch);
      return this.scratch.toString("latin1", 0, n);
    } catch (err) {
      if (err instanceof HuffmanError) throw new CompressionError(err.message);
      throw err;
    }
  }

  private nameAt(index: number): string {
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]![0];
    return this.names[this.slot(index)]!;
  }

  private valueAt(index: number): string {
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]![1];
    return this.values[this.slot(index)]!;
  }

  private slot(index: number): number {
    const i = index - STATIC_TABLE.length - 1;
    if (i >= this.count) throw new CompressionError(`index ${index} past the tables`);
    return (this.head - 1 - i + MAX_ENTRIES) % MAX_ENTRIES;
  }

  /** §4.4: an entry larger than the table empties it and is not added. */
  private insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    this.evict(size);
    if (size > this.maxSize) return;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.head = (this.head + 1) % MAX_ENTRIES;
    this.count++;
    this.size += size;
  }

  /** Drops the oldest entries until `room` more bytes fit. */
  private evict(room: number): void {
    while (this.count > 0 && this.size + room > this.maxSize) {
      const oldest = (this.head - this.count + MAX_ENTRIES) % MAX_ENTRIES;
      this.size -= this.names[oldest]!.length + this.values[oldest]!.length + ENTRY_OVERHEAD;
      this.names[oldest] = "";
      this.values[oldest] = "";
      this.count--;
    }
  }

  /** The dynamic table's entries, newest first (tests compare it with RFC 7541 Appendix C). */
  entries(): [string, string][] {
    const out: [string, string][] = [];
    for (let i = 0; i < this.count; i++) {
      const s = (this.head - 1 - i + MAX_ENTRIES) % MAX_ENTRIES;
      out.push([this.names[s]!, this.values[s]!]);
    }
    return out;
  }

  get tableSize(): number {
    return this.size;
  }
}
