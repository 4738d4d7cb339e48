import { HUFFMAN_CODES, HUFFMAN_LENGTHS } from "./huffman-table.js";

/**
 * RFC 7541 §5.2 Huffman decoding, four bits at a time: the code's tree is walked once at
 * start-up into a table of (state, nibble) → (next state, byte emitted or none). No code is
 * shorter than 5 bits, so a nibble completes at most one byte. A string decodes to latin1
 * text, as every other header string does here.
 */
const EOS = 256;

/** Tree nodes: children of internal nodes, the symbol of leaves (-1 for internal). */
const left: number[] = [-1];
const right: number[] = [-1];
const symbol: number[] = [-1];
const depth: number[] = [0];
const onesOnly: boolean[] = [true];

function addCode(sym: number, code: number, length: number): void {
  let node = 0;
  for (let bit = length - 1; bit >= 0; bit--) {
    const one = ((code / 2 ** bit) & 1) === 1;
    const children = one ? right : left;
    let next = children[node]!;
    if (next === -1) {
      next = symbol.length;
      left.push(-1);
      right.push(-1);
      symbol.push(-1);
      depth.push(depth[node]! + 1);
      onesOnly.push(onesOnly[node]! && one);
      children[node] = next;
    }
    node = next;
  }
  symbol[node] = sym;
}
for (let sym = 0; sym < 256; sym++) addCode(sym, HUFFMAN_CODES[sym]!, HUFFMAN_LENGTHS[sym]!);
addCode(EOS, 0x3fffffff, 30);

/** Internal nodes numbered as states; the root is state 0. */
const stateOf = new Map<number, number>();
const nodeOfState: number[] = [];
for (let node = 0; node < symbol.length; node++) {
  if (symbol[node] !== -1) continue;
  stateOf.set(node, nodeOfState.length);
  nodeOfState.push(node);
}

const FAIL = -1;
/** per (state * 16 + nibble): the next state, or FAIL (EOS decoded) */
const nextState = new Int16Array(nodeOfState.length * 16);
/** per (state * 16 + nibble): the byte completed, or -1 */
const emitted = new Int16Array(nodeOfState.length * 16);
/** per state: a string may end here (padding: at most 7 bits, all ones, a prefix of EOS) */
const accepting = new Uint8Array(nodeOfState.length);

for (let state = 0; state < nodeOfState.length; state++) {
  const start = nodeOfState[state]!;
  accepting[state] = start === 0 || (onesOnly[start]! && depth[start]! <= 7) ? 1 : 0;
  for (let nibble = 0; nibble < 16; nibble++) {
    let node = start;
    let out = -1;
    let failed = false;
    for (let bit = 3; bit >= 0; bit--) {
      node = ((nibble >> bit) & 1) === 1 ? right[node]! : left[node]!;
      const sym = symbol[node]!;
      if (sym === EOS) failed = true;
      else if (sym !== -1) {
        out = sym;
        node = 0;
      }
    }
    nextState[state * 16 + nibble] = failed ? FAIL : stateOf.get(node)!;
    emitted[state * 16 + nibble] = out;
  }
}

export class HuffmanError extends Error {
  override name = "HuffmanError";
}

/** Bytes `src[start, end)` Huffman-decoded into `scratch` (at least (end - start) * 8 / 5 bytes); returns the length. */
export function huffmanDecode(src: Uint8Array, start: number, end: number, scratch: Uint8Array): number {
  let state = 0;
  let n = 0;
  for (let i = start; i < end; i++) {
    const byte = src[i]!;
    let k = state * 16 + (byte >> 4);
    let e = emitted[k]!;
    if (e !== -1) scratch[n++] = e;
    state = nextState[k]!;
    if (state === FAIL) throw new HuffmanError("EOS in a Huffman string");
    k = state * 16 + (byte & 15);
    e = emitted[k]!;
    if (e !== -1) scratch[n++] = e;
    state = nextState[k]!;
    if (state === FAIL) throw new HuffmanError("EOS in a Huffman string");
  }
  if (accepting[state] !== 1) throw new HuffmanError("bad Huffman padding");
  return n;
}

/** Huffman-encodes latin1 `text` (for tests and clients; the server sends its strings raw). */
export function huffmanEncode(text: string): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i) & 255;
    const len = HUFFMAN_LENGTHS[c]!;
    const code = HUFFMAN_CODES[c]!;
    for (let b = len - 1; b >= 0; b--) {
      acc = (acc << 1) | ((code / 2 ** b) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 255);
  return Buffer.from(out);
}
