/**
 * The request-header decoder against RFC 7541 Appendix C: each example's header list and the
 * dynamic table it leaves (entries and size), with and without Huffman, requests (C.3, C.4)
 * and responses with a 256-byte table that evicts (C.5, C.6); then what it must refuse.
 */
import t from "tap";
import { CompressionError, HpackDecoder } from "../../../../src/rls/h2/hpack/hpack.js";
import { huffmanDecode, huffmanEncode } from "../../../../src/rls/h2/hpack/huffman.js";

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ""), "hex");

function decode(d: HpackDecoder, block: Buffer): [string, string][] {
  const out: [string, string][] = [];
  d.decode(block, 0, block.length, (n, v) => out.push([n, v]));
  return out;
}

const REQ1: [string, string][] = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"],
];
const REQ2: [string, string][] = [...REQ1, ["cache-control", "no-cache"]];
const REQ3: [string, string][] = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"],
];
const T1: [string, string][] = [[":authority", "www.example.com"]];
const T2: [string, string][] = [["cache-control", "no-cache"], ...T1];
const T3: [string, string][] = [["custom-key", "custom-value"], ...T2];

for (const [name, blocks] of [
  [
    "C.3 requests without Huffman",
    ["828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865", "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"],
  ],
  ["C.4 requests with Huffman", ["828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf", "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"]],
] as const) {
  t.test(name, async (t) => {
    const d = new HpackDecoder();
    t.same(decode(d, hex(blocks[0])), REQ1);
    t.same(d.entries(), T1);
    t.equal(d.tableSize, 57);
    t.same(decode(d, hex(blocks[1])), REQ2);
    t.same(d.entries(), T2);
    t.equal(d.tableSize, 110);
    t.same(decode(d, hex(blocks[2])), REQ3);
    t.same(d.entries(), T3);
    t.equal(d.tableSize, 164);
  });
}

const DATE1 = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2 = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION = "https://www.example.com";
const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

for (const [name, blocks] of [
  [
    "C.5 responses without Huffman, a 256-byte table",
    [
      "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
      "4803333037c1c0bf",
      "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
    ],
  ],
  [
    "C.6 responses with Huffman, a 256-byte table",
    [
      "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
      "4883640effc1c0bf",
      "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
    ],
  ],
] as const) {
  t.test(name, async (t) => {
    const d = new HpackDecoder(256);
    t.same(decode(d, hex(blocks[0])), [
      [":status", "302"],
      ["cache-control", "private"],
      ["date", DATE1],
      ["location", LOCATION],
    ]);
    t.equal(d.tableSize, 222);
    t.same(decode(d, hex(blocks[1])), [
      [":status", "307"],
      ["cache-control", "private"],
      ["date", DATE1],
      ["location", LOCATION],
    ]);
    t.same(d.entries(), [
      [":status", "307"],
      ["location", LOCATION],
      ["date", DATE1],
      ["cache-control", "private"],
    ]);
    t.equal(d.tableSize, 222);
    t.same(decode(d, hex(blocks[2])), [
      [":status", "200"],
      ["cache-control", "private"],
      ["date", DATE2],
      ["location", LOCATION],
      ["content-encoding", "gzip"],
      ["set-cookie", COOKIE],
    ]);
    t.same(d.entries(), [
      ["set-cookie", COOKIE],
      ["content-encoding", "gzip"],
      ["date", DATE2],
    ]);
    t.equal(d.tableSize, 215);
  });
}

t.test("Huffman: every byte round-trips; EOS and bad padding are refused", async (t) => {
  const all = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join("");
  const encoded = huffmanEncode(all);
  const scratch = Buffer.alloc(encoded.length * 2);
  t.equal(scratch.toString("latin1", 0, huffmanDecode(encoded, 0, encoded.length, scratch)), all);
  // 30 one-bits (EOS) inside a string
  t.throws(() => huffmanDecode(hex("ffffffff"), 0, 4, scratch));
  // "a" (00011) padded with zeros instead of ones
  t.throws(() => huffmanDecode(hex("18"), 0, 1, scratch));
  // 8 bits of padding: one byte too many
  const a = huffmanEncode("a");
  t.throws(() => huffmanDecode(Buffer.concat([a, hex("ff")]), 0, a.length + 1, scratch));
});

t.test("blocks the decoder refuses: COMPRESSION_ERROR, never a wrong header", async (t) => {
  const d = () => new HpackDecoder();
  const bad = (block: string, why: string) => t.throws(() => decode(d(), hex(block)), CompressionError, why);
  bad("80", "index 0");
  bad("be", "a dynamic index past an empty table");
  bad("ff8080808001", "an integer past 2^28");
  bad("4003616263", "a string past the block");
  bad("3fe21f", "a table size update above SETTINGS_HEADER_TABLE_SIZE");
  bad("823f01", "a table size update after a field");
  // a size update to 0 empties the table
  const dec = d();
  decode(dec, hex("828684410f7777772e6578616d706c652e636f6d"));
  t.equal(dec.tableSize, 57);
  t.same(decode(dec, hex("2082")), [[":method", "GET"]]);
  t.equal(dec.tableSize, 0);
  t.same(dec.entries(), []);
});

t.test("an entry larger than the table empties it and is not added (RFC 7541 §4.4)", async (t) => {
  const dec = new HpackDecoder(64);
  decode(dec, hex("4001610162")); // a: b (1 + 1 + 32 bytes)
  t.equal(dec.tableSize, 34);
  const big = "x".repeat(40);
  const block = Buffer.concat([hex("4001" + "79"), Buffer.from([big.length]), Buffer.from(big)]);
  t.same(decode(dec, block), [["y", big]]);
  t.same(dec.entries(), []);
});
