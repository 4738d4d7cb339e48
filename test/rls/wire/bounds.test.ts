/**
 * One set of bounds at both doors (wire/fields.ts): the protobuf decoder and the proto3 JSON
 * reader refuse the same requests with the same field and problem, before they allocate what
 * a bound refuses: the 65th descriptor, the 33rd entry, an over-long key or value, and text
 * that is not well-formed Unicode.
 */
import t from "tap";
import { decodeRateLimitRequest } from "../../../src/rls/wire/codec.js";
import { RequestFieldError, RLS_BOUNDS, RLS_FIELDS } from "../../../src/rls/wire/fields.js";
import { rlsRequestFromJson } from "../../../src/rls/wire/json.js";

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) {
    out.push((n % 128) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
const len = (field: number, body: Buffer) => Buffer.from([...varint(field * 8 + 2), ...varint(body.length), ...body]);
const entry = (key: Buffer, value: Buffer) => len(1, Buffer.concat([len(1, key), len(2, value)]));

/** a request as protobuf bytes and as proto3 JSON, of text given as JS strings (or raw bytes for protobuf) */
function both(domain: string, descriptors: [string | Buffer, string | Buffer][][]): { proto: Buffer; json: unknown } {
  const b = (s: string | Buffer) => (typeof s === "string" ? Buffer.from(s, "utf8") : s);
  const proto = Buffer.concat([len(1, Buffer.from(domain)), ...descriptors.map((d) => len(2, Buffer.concat(d.map(([k, v]) => entry(b(k), b(v))))))]);
  const json = { domain, descriptors: descriptors.map((d) => ({ entries: d.map(([k, v]) => ({ key: String(k), value: String(v) })) })) };
  return { proto, json };
}

function refusal(read: () => unknown): string {
  try {
    read();
    return "accepted";
  } catch (err) {
    return err instanceof RequestFieldError ? err.message : `not a RequestFieldError: ${String(err)}`;
  }
}

t.test("both doors refuse the same requests with the same field and problem", async (t) => {
  const one: [string, string][] = [["k", "v"]];
  const cases: [string, ReturnType<typeof both>, string][] = [
    [
      "65 descriptors",
      both(
        "d",
        Array.from({ length: 65 }, () => one),
      ),
      "descriptors: at most 64 per request",
    ],
    ["33 entries", both("d", [Array.from({ length: 33 }, () => ["k", "v"] as [string, string])]), "descriptors[0].entries: at most 32 per descriptor"],
    ["a 257-byte key", both("d", [[["k".repeat(257), "v"]]]), "descriptors[0].entries[0].key: must be at most 256 bytes"],
    ["a 4097-byte value", both("d", [[["k", "é".repeat(2049)]]]), "descriptors[0].entries[0].value: must be at most 4096 bytes"],
  ];
  for (const [what, request, message] of cases) {
    t.equal(
      refusal(() => decodeRateLimitRequest(request.proto)),
      message,
      `gRPC, ${what}`,
    );
    t.equal(
      refusal(() => rlsRequestFromJson(request.json)),
      message,
      `/json, ${what}`,
    );
  }
  const within = both(
    "d",
    Array.from({ length: 64 }, () => Array.from({ length: 32 }, () => ["k", "v"] as [string, string])),
  );
  t.equal(decodeRateLimitRequest(within.proto).descriptors!.length, 64, "64 descriptors of 32 entries are read");
  t.ok(within.proto.length < RLS_BOUNDS.messageBytes, `the largest count fits the message bound (${within.proto.length} bytes)`);
});

t.test("the decoder stops at the 65th descriptor whatever follows (1 MiB of 4-byte descriptors)", async (t) => {
  const fourByte = Buffer.from([0x12, 0x02, 0x0a, 0x00]);
  const huge = Buffer.concat(Array.from({ length: 262_144 }, () => fourByte));
  const start = performance.now();
  t.equal(
    refusal(() => decodeRateLimitRequest(huge)),
    "descriptors: at most 64 per request",
  );
  t.ok(performance.now() - start < 50, "refused in well under 50 ms");
});

t.test("text that is not well-formed Unicode is refused naming the field", async (t) => {
  const cesu = Buffer.from([0x62, 0xed, 0xa0, 0x80]);
  t.equal(
    refusal(() => decodeRateLimitRequest(both("d", [[["k", cesu]]]).proto)),
    "descriptors[0].entries[0].value: must be well-formed Unicode (UTF-8 on the wire, no lone surrogate)",
  );
  t.equal(
    refusal(() => decodeRateLimitRequest(both("d", [[[Buffer.from([0xc0]), "v"]]]).proto)),
    "descriptors[0].entries[0].key: must be well-formed Unicode (UTF-8 on the wire, no lone surrogate)",
  );
  t.match(
    refusal(() => decodeRateLimitRequest(Buffer.concat([len(1, Buffer.from([0xff]))]))),
    /^domain: must be well-formed/,
  );
  t.match(
    refusal(() => rlsRequestFromJson(both("d", [[["k", "a\ud800"]]]).json)),
    /^descriptors\[0\]\.entries\[0\]\.value: must be well-formed/,
  );
  t.match(
    refusal(() => rlsRequestFromJson(both("d", [[["\udc00", "v"]]]).json)),
    /^descriptors\[0\]\.entries\[0\]\.key: must be well-formed/,
  );
  t.match(
    refusal(() => rlsRequestFromJson({ domain: "\ud800", descriptors: [] })),
    /^domain: must be well-formed/,
  );
  t.equal(
    refusal(() => rlsRequestFromJson(both("d", [[["k", "😀"]]]).json)),
    "accepted",
    "a surrogate pair is well-formed",
  );
});

t.test("the JSON names are the field table's", async (t) => {
  const json = rlsRequestFromJson({
    [RLS_FIELDS.request.domain.json]: "d",
    [RLS_FIELDS.request.hits_addend.json]: 2,
    [RLS_FIELDS.request.descriptors.json]: [{ [RLS_FIELDS.descriptor.entries.json]: [{ key: "k" }], [RLS_FIELDS.descriptor.hits_addend.json]: 1 }],
  });
  t.same(json, { domain: "d", hits_addend: 2, descriptors: [{ entries: [{ key: "k" }], hits_addend: { value: 1 } }] });
});
