/**
 * The header blocks this server sends, HPACK-encoded once as literals "without indexing"
 * (RFC 7541 §6.2.2): they never touch the client's dynamic table, so the bytes stay valid on
 * every connection whatever SETTINGS_HEADER_TABLE_SIZE the client sets.
 */

/** RFC 7541 §5.1: `value` with an N-bit prefix; `first` holds the pattern bits of the first byte. */
export function hpackInteger(first: number, prefixBits: number, value: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest & 127) | 128);
    rest >>>= 7;
  }
  out.push(rest);
  return out;
}

/** A raw (not Huffman) string literal. */
function stringLiteral(text: string): number[] {
  const bytes = Buffer.from(text, "latin1");
  return [...hpackInteger(0, 7, bytes.length), ...bytes];
}

/** A field whose name is entry `nameIndex` of the static table, without indexing. */
function indexedName(nameIndex: number, value: string): number[] {
  return [...hpackInteger(0, 4, nameIndex), ...stringLiteral(value)];
}

/** A field with a literal name, without indexing. */
function literal(name: string, value: string): number[] {
  return [0, ...stringLiteral(name), ...stringLiteral(value)];
}

const STATUS_200 = [0x88]; // static entry 8: ":status: 200"
const STATUS = 8; // ":status" name
const CONTENT_TYPE = 31;

/** `:status 200`, `content-type: application/grpc` */
export const GRPC_HEADERS = Buffer.from([...STATUS_200, ...indexedName(CONTENT_TYPE, "application/grpc")]);

/** `grpc-status: 0` */
export const GRPC_OK_TRAILERS = Buffer.from(literal("grpc-status", "0"));

/** An HTTP status (not a gRPC call: 415; a header list over the bound: 431), and the type of a text body when one follows. */
export function statusBlock(status: number, text = false): Buffer {
  const head = status === 200 ? STATUS_200 : indexedName(STATUS, String(status));
  return Buffer.from(text ? [...head, ...indexedName(CONTENT_TYPE, "text/plain")] : head);
}

/** A trailers-only answer (gRPC's form for errors): status, content type, grpc-status and grpc-message. */
export function errorBlock(code: number, message: string): Buffer {
  return Buffer.from([...GRPC_HEADERS, ...literal("grpc-status", String(code)), ...literal("grpc-message", percentEncoded(message))]);
}

const HEX = "0123456789ABCDEF";

/**
 * grpc-message is percent-encoded: bytes outside printable ASCII, and "%" itself. Encoded
 * from the UTF-8 bytes, so a lone surrogate (caller input cut short by echo() inside a pair)
 * becomes U+FFFD instead of throwing as encodeURIComponent would.
 */
export function percentEncoded(message: string): string {
  const bytes = Buffer.from(message, "utf8");
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : "%" + HEX[b >> 4]! + HEX[b & 15]!;
  }
  return out;
}
