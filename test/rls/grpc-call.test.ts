/** What a gRPC call is on either HTTP/2 server: grpc-timeout, grpc-message, the decoder's refusals. */
import t from "tap";
import { grpcTimeoutMs, percentEncoded, refusal } from "../../src/rls/grpc-call.js";
import { DecodeError } from "../../src/rls/wire/codec.js";
import { echo, ECHO_CHARS, RequestFieldError } from "../../src/rls/wire/fields.js";

t.test("grpc-timeout: value and unit, at least 1 ms; malformed is undefined", async (t) => {
  t.equal(grpcTimeoutMs("100m"), 100);
  t.equal(grpcTimeoutMs("2S"), 2000);
  t.equal(grpcTimeoutMs("1M"), 60_000);
  t.equal(grpcTimeoutMs("1H"), 3_600_000);
  t.equal(grpcTimeoutMs("1500u"), 2);
  t.equal(grpcTimeoutMs("5n"), 1);
  for (const bad of ["", "100", "m", "123456789m", "1.5S", "-1S", "10x", " 1S"]) t.equal(grpcTimeoutMs(bad), undefined, JSON.stringify(bad));
});

t.test("grpc-message: printable ASCII kept, '%' and every other UTF-8 byte percent-encoded", async (t) => {
  t.equal(percentEncoded("no such method /x"), "no such method /x");
  t.equal(percentEncoded("100% é\n"), "100%25 %C3%A9%0A");
  // caller input cut by echo() can end inside a surrogate pair: encoded as U+FFFD, never a throw
  const cut = echo("a".repeat(ECHO_CHARS - 1) + "😀😀");
  t.throws(() => encodeURIComponent(cut), URIError, "what encodeURIComponent would do with it");
  t.equal(percentEncoded(cut), "a".repeat(ECHO_CHARS - 1) + "%EF%BF%BD" + "%E2%80%A6");
});

t.test("refusal: a decode error names the message type, a field error names itself, a fault is none", async (t) => {
  const decode = new DecodeError("truncated varint");
  t.equal(refusal(decode, "RateLimitRequest"), `request: not a RateLimitRequest (${decode.message})`);
  const field = new RequestFieldError("domain", "must not be empty");
  t.equal(refusal(field, "RateLimitRequest"), field.message);
  t.equal(refusal(new TypeError("x is undefined"), "RateLimitRequest"), undefined);
  t.equal(refusal("a string", "RateLimitRequest"), undefined);
});
