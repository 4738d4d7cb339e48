/**
 * The proto3 JSON mapping of the RLS messages (POST /json): requests read by either field
 * name, integers as numbers or strings, enums by name or number; responses written with JSON
 * names, defaults left out, enums as names and durations as proto3 JSON writes them.
 */
import t from "tap";
import { durationJson, JsonFieldError, rlsRequestFromJson, rlsResponseJson } from "../../../src/rls/wire/json.js";

t.test("a request by JSON names and by .proto names reads the same", async (t) => {
  const byJson = rlsRequestFromJson({
    domain: "d",
    hitsAddend: 3,
    descriptors: [{ entries: [{ key: "k", value: "v" }], limit: { requestsPerUnit: 5, unit: "MINUTE" }, hitsAddend: "0" }],
  });
  const byProto = rlsRequestFromJson({
    domain: "d",
    hits_addend: "3",
    descriptors: [{ entries: [{ key: "k", value: "v" }], limit: { requests_per_unit: "5", unit: 2 }, hits_addend: 0 }],
  });
  const expected = {
    domain: "d",
    hits_addend: 3,
    descriptors: [{ entries: [{ key: "k", value: "v" }], limit: { requests_per_unit: 5, unit: 2 }, hits_addend: { value: 0 } }],
  };
  t.same(byJson, expected);
  t.same(byProto, expected);
  t.same(
    rlsRequestFromJson({ domain: null, descriptors: [{ entries: [{ key: "k", value: null }], limit: null, hitsAddend: null }] }),
    {
      descriptors: [{ entries: [{ key: "k" }] }],
    },
    "null is unset",
  );
});

t.test("a bad field is named by its .proto path", async (t) => {
  const field = (body: unknown) => {
    try {
      rlsRequestFromJson(body);
      return undefined;
    } catch (err) {
      return err instanceof JsonFieldError ? err.field : "not a JsonFieldError";
    }
  };
  t.equal(field(null), "request");
  t.equal(field({ nope: 1 }), "nope");
  t.equal(field({ domain: "d", hitsAddend: 1, hits_addend: 2 }), "hits_addend");
  t.equal(field({ hitsAddend: "1e3" }), "hits_addend", "digits only in a string");
  t.equal(field({ hitsAddend: 4_294_967_296 }), "hits_addend", "uint32");
  t.equal(field({ descriptors: [null] }), "descriptors[0]");
  t.equal(field({ descriptors: [{ entries: [{ key: 1 }] }] }), "descriptors[0].entries[0].key");
  t.equal(field({ descriptors: [{ limit: { unit: "minute" } }] }), "descriptors[0].limit.unit", "enum names as the .proto spells them");
  t.equal(field({ descriptors: [{ hitsAddend: { value: 1 } }] }), "descriptors[0].hits_addend", "UInt64Value is its bare value");
  t.equal(field({ descriptors: [{ hitsAddend: "18446744073709551615" }] }), "descriptors[0].hits_addend", "past what counts exactly");
  t.equal(field({ descriptors: [{ hitsAddend: "9007199254740991" }] }), undefined);
});

t.test("a response in proto3 JSON", async (t) => {
  const text = rlsResponseJson({
    overall_code: 2,
    statuses: [
      { code: 1 },
      { code: 1, limit_remaining: 4_294_967_295 },
      { code: 2, current_limit: { name: "n", requests_per_unit: 5, unit: 7 }, duration_until_reset: { seconds: 12, nanos: 500_000_000 } },
      { code: 1, current_limit: { unit: 1 }, limit_remaining: 3, duration_until_reset: { seconds: 0, nanos: 0 } },
    ],
    response_headers_to_add: [],
  });
  t.same(JSON.parse(text), {
    overallCode: "OVER_LIMIT",
    statuses: [
      { code: "OK" },
      { code: "OK", limitRemaining: 4_294_967_295 },
      { code: "OVER_LIMIT", currentLimit: { name: "n", requestsPerUnit: 5, unit: "WEEK" }, durationUntilReset: "12.500s" },
      { code: "OK", currentLimit: { unit: "SECOND" }, limitRemaining: 3, durationUntilReset: "0s" },
    ],
  });
  const headers = JSON.parse(rlsResponseJson({ overall_code: 1, statuses: [], response_headers_to_add: [{ key: "RateLimit", value: "x" }] }));
  t.same(headers, { overallCode: "OK", responseHeadersToAdd: [{ key: "RateLimit", value: "x" }] });
});

t.test("durations: 0, 3, 6 or 9 fractional digits", async (t) => {
  t.equal(durationJson(3, 0), "3s");
  t.equal(durationJson(3, 1_000_000), "3.001s");
  t.equal(durationJson(3, 1_000), "3.000001s");
  t.equal(durationJson(3, 1), "3.000000001s");
});
