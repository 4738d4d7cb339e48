/**
 * The hand-written codec against protobuf.js reading the package's own .proto files: what
 * one encodes the other decodes to the same message, unknown fields are skipped, and a
 * malformed buffer is a DecodeError, never a wrong request.
 */
import path from "node:path";
import protobuf from "protobufjs";
import t from "tap";
import {
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  DecodeError,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "../../../src/rls/wire/codec.js";
import { HEALTH_PROTO, PROTO_DIR, RLS_PROTO } from "../../../src/rls/wire/protos.js";
import type { RlsResponse } from "../../../src/rls/wire/messages.js";

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : path.join(PROTO_DIR, target));
root.loadSync([RLS_PROTO, HEALTH_PROTO], { keepCase: true });
const Request = root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
const Response = root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse");
const HealthRequest = root.lookupType("grpc.health.v1.HealthCheckRequest");
const HealthResponse = root.lookupType("grpc.health.v1.HealthCheckResponse");
const toObject = { longs: Number, enums: Number, defaults: false } as const;

t.test("RateLimitRequest: protobuf.js encodes, the codec decodes the same request", async (t) => {
  const request = {
    domain: "edge",
    hits_addend: 3,
    descriptors: [
      {
        entries: [
          { key: "remote_address", value: "10.0.0.1" },
          { key: "path", value: "/é/ünicode" },
        ],
      },
      { entries: [{ key: "user", value: "x".repeat(300) }], limit: { requests_per_unit: 70_000, unit: 2 }, hits_addend: { value: 0 } },
      { entries: [{ key: "k" }], hits_addend: { value: 2 ** 40 } },
    ],
  };
  const bytes = Request.encode(Request.fromObject(request)).finish();
  t.same(decodeRateLimitRequest(bytes), request);
});

t.test("unknown fields of every wire type are skipped", async (t) => {
  const known = Request.encode(Request.fromObject({ domain: "d", descriptors: [{ entries: [{ key: "k", value: "v" }] }] })).finish();
  const writer = protobuf.Writer.create();
  writer.uint32((9 << 3) | 0).uint64(123456789);
  writer.uint32((10 << 3) | 1).fixed64(7);
  writer.uint32((11 << 3) | 2).string("ignored");
  writer.uint32((12 << 3) | 5).fixed32(9);
  const extra = writer.finish();
  t.same(decodeRateLimitRequest(Buffer.concat([extra, known])), { domain: "d", descriptors: [{ entries: [{ key: "k", value: "v" }] }] });
});

t.test("a malformed buffer is a DecodeError", async (t) => {
  const good = Request.encode(Request.fromObject({ domain: "edge", descriptors: [{ entries: [{ key: "k", value: "v" }] }] })).finish();
  for (const bad of [
    good.subarray(0, good.length - 1),
    Buffer.from([0x0a, 0x05, 0x61]),
    Buffer.from([0x80, 0x80]),
    Buffer.from([0x0b]),
    Buffer.alloc(11, 0xff),
  ]) {
    t.throws(() => decodeRateLimitRequest(bad), DecodeError);
  }
});

t.test("RateLimitResponse: the codec encodes, protobuf.js decodes the same answer", async (t) => {
  const response: RlsResponse = {
    overall_code: 2,
    statuses: [
      { code: 1 },
      { code: 1, limit_remaining: 4294967295 },
      { code: 2, current_limit: { name: "per_ip", requests_per_unit: 100, unit: 7 }, duration_until_reset: { seconds: 59, nanos: 250_000_000 } },
      {
        code: 1,
        current_limit: { name: "n".repeat(200), requests_per_unit: 5, unit: 2 },
        limit_remaining: 4,
        duration_until_reset: { seconds: 86_399, nanos: 0 },
      },
    ],
    response_headers_to_add: [{ key: "RateLimit", value: '"per_ip";r=0;t=59' }],
  };
  const decoded = Response.toObject(Response.decode(encodeRateLimitResponse(response)), toObject);
  t.same(decoded, {
    overall_code: 2,
    statuses: [
      { code: 1 },
      { code: 1, limit_remaining: 4294967295 },
      { code: 2, current_limit: { name: "per_ip", requests_per_unit: 100, unit: 7 }, duration_until_reset: { seconds: 59, nanos: 250_000_000 } },
      { code: 1, current_limit: { name: "n".repeat(200), requests_per_unit: 5, unit: 2 }, limit_remaining: 4, duration_until_reset: { seconds: 86_399 } },
    ],
    response_headers_to_add: [{ key: "RateLimit", value: '"per_ip";r=0;t=59' }],
  });
});

t.test("grpc.health.v1 messages", async (t) => {
  t.same(decodeHealthCheckRequest(HealthRequest.encode({ service: "envoy.service.ratelimit.v3.RateLimitService" }).finish()), {
    service: "envoy.service.ratelimit.v3.RateLimitService",
  });
  t.same(decodeHealthCheckRequest(new Uint8Array(0)), {});
  t.same(HealthResponse.toObject(HealthResponse.decode(encodeHealthCheckResponse({ status: 2 })), toObject), { status: 2 });
});

t.test("RateLimitResponse.dynamic_metadata: the codec encodes a google.protobuf.Struct protobuf.js reads back", async (t) => {
  const long = "x".repeat(300);
  const dynamic_metadata = {
    domain: "llm",
    empty: "",
    n: 0,
    f: -1.5,
    yes: true,
    no: false,
    none: null,
    list: [1, "two", [3], { four: 4 }],
    // over 127 bytes: a nested length of two bytes
    nested: { deep: { deeper: long } },
    "é key": "ü",
  };
  const response: RlsResponse = { overall_code: 1, statuses: [], response_headers_to_add: [], dynamic_metadata };
  const decoded = Response.toObject(Response.decode(encodeRateLimitResponse(response)), { ...toObject, oneofs: true }) as Record<string, any>;
  t.equal(decoded.overall_code, 1);
  // Value's oneof as protobuf.js names it (`kind`): a field set at its default is still set.
  const plain = (v: any): unknown => {
    if (v.fields !== undefined) return Object.fromEntries(Object.entries(v.fields).map(([k, x]) => [k, plain(x)]));
    switch (v.kind) {
      case "structValue":
        return plain(v.structValue);
      case "listValue":
        return (v.listValue.values ?? []).map(plain);
      case "nullValue":
        return null;
      default:
        return v.kind === undefined ? "(no kind)" : v[v.kind];
    }
  };
  t.same(plain(decoded.dynamic_metadata), dynamic_metadata, "every kind of value, nested, read back as written");
  t.notOk(Response.decode(encodeRateLimitResponse({ ...response, dynamic_metadata: undefined })).toJSON().dynamic_metadata, "no field unless asked");
});
