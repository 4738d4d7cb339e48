import { REQUEST_BOUNDS } from "../../decision.js";

/**
 * The one table of the RLS request's fields and the one set of bounds, read by both doors:
 * the protobuf decoder of the gRPC port (codec.ts) and the proto3 JSON reader of POST /json
 * (json.ts). Each door checks every bound below while it reads, before it allocates what
 * the bound refuses, and names the field the way the other does, so one request gets the
 * same answer at either door.
 */

/** protobuf wire types */
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;

export interface FieldDef {
  /** the .proto field number */
  readonly number: number;
  readonly wireType: number;
  /** proto3 JSON name (lowerCamelCase); the .proto name is the key of the table */
  readonly json: string;
}

const field = (number: number, wireType: number, json: string): FieldDef => Object.freeze({ number, wireType, json });

/** proto/envoy/service/ratelimit/v3/rls.proto, proto/envoy/extensions/common/ratelimit/v3, proto/grpc/health/v1 */
export const RLS_FIELDS = Object.freeze({
  request: Object.freeze({ domain: field(1, LEN, "domain"), descriptors: field(2, LEN, "descriptors"), hits_addend: field(3, VARINT, "hitsAddend") }),
  descriptor: Object.freeze({
    entries: field(1, LEN, "entries"),
    limit: field(2, LEN, "limit"),
    hits_addend: field(3, LEN, "hitsAddend"),
    is_negative_hits: field(4, VARINT, "isNegativeHits"),
  }),
  entry: Object.freeze({ key: field(1, LEN, "key"), value: field(2, LEN, "value") }),
  limit: Object.freeze({ requests_per_unit: field(1, VARINT, "requestsPerUnit"), unit: field(2, VARINT, "unit") }),
  /** google.protobuf.UInt64Value */
  uint64Value: Object.freeze({ value: field(1, VARINT, "value") }),
  healthRequest: Object.freeze({ service: field(1, LEN, "service") }),
  /** RateLimitResponse's dynamic_metadata (written, never read): the rest of the response is codec.ts's */
  response: Object.freeze({ dynamic_metadata: field(6, LEN, "dynamicMetadata") }),
  /** google.protobuf.Struct: a map<string, Value>, each pair a message of key 1 and value 2 */
  struct: Object.freeze({ fields: field(1, LEN, "fields") }),
  structEntry: Object.freeze({ key: field(1, LEN, "key"), value: field(2, LEN, "value") }),
  /** google.protobuf.Value's oneof (null_value is the enum NullValue, number_value a double) */
  value: Object.freeze({
    null_value: field(1, VARINT, "nullValue"),
    number_value: field(2, I64, "numberValue"),
    string_value: field(3, LEN, "stringValue"),
    bool_value: field(4, VARINT, "boolValue"),
    struct_value: field(5, LEN, "structValue"),
    list_value: field(6, LEN, "listValue"),
  }),
  listValue: Object.freeze({ values: field(1, LEN, "values") }),
});

/** A field's tag as it opens the field on the wire. */
export const tagOf = (f: FieldDef): number => f.number * 8 + f.wireType;

/**
 * What one RLS request may hold. Envoy sends one descriptor per rate limit action of a
 * route, a handful of entries each, a few hundred bytes in all; a bound keeps one call's
 * work small whoever sends it. Lengths of text are UTF-8 bytes at both doors.
 */
export const RLS_BOUNDS = Object.freeze({
  domain: REQUEST_BOUNDS.namespace,
  descriptors: { min: 1, max: 64 },
  entries: { min: 1, max: 32 },
  /** an entry's key: a descriptor key of a policy file (`remote_address`, `header_match`...) */
  keyBytes: { min: 1, max: 256 },
  /** an entry's value: a header, a path, an address */
  valueBytes: { min: 0, max: 4096 },
  /** a caller's `limit` override: the RLS wire's uint32, as in a policy file (0 blocks everything) */
  requestsPerUnit: { min: 0, max: REQUEST_BOUNDS.chargeLimit.max },
  /**
   * A whole request message (protobuf bytes on the gRPC port, the JSON body of POST /json).
   * 64 descriptors of 32 one-byte entries take 10.4 KB in protobuf; this leaves room for
   * long values and is far above any request Envoy makes, so no message larger than a valid
   * request is ever buffered.
   */
  messageBytes: 64 * 1024,
  /** a grpc.health.v1 HealthCheckRequest: a service name, unauthenticated */
  healthMessageBytes: 1024,
  /** a health service name: the longest known is 43 characters */
  serviceBytes: 256,
} as const);

/** A field of a request that breaks a rule or a bound: INVALID_ARGUMENT (400 on POST /json) naming it. */
export class RequestFieldError extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = "RequestFieldError";
  }
}

export const NOT_WELL_FORMED = "must be well-formed Unicode (UTF-8 on the wire, no lone surrogate)";

/**
 * Caller input quoted in an answer or a log: at most ECHO_CHARS characters, so an error
 * never costs more than the bound, whatever the input's size.
 */
export const ECHO_CHARS = 40;

export function echo(text: string): string {
  return text.length <= ECHO_CHARS ? text : text.slice(0, ECHO_CHARS) + "…";
}
