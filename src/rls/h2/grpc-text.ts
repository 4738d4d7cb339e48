import { DecodeError } from "../wire/codec.js";

/** What a caller sent is echoed in an answer at most this long: enough to recognise it, not to reflect it. */
const ECHO_CHARS = 48;

/** `text` cut to ECHO_CHARS characters (grpc-message is percent-encoded later). */
export function echo(text: string): string {
  return text.length <= ECHO_CHARS ? text : `${text.slice(0, ECHO_CHARS)}…`;
}

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * grpc-timeout (gRPC over HTTP/2: at most 8 digits and a unit H M S m u n) in ms, at least 1;
 * undefined when malformed (the call then gets the default deadline).
 */
export function grpcTimeoutMs(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return undefined;
  return Math.max(1, Math.ceil(Number(m[1]) * UNIT_MS[m[2]!]!));
}

/**
 * What the answer says of a request the decoder refused: a DecodeError is named with the
 * message type, a field the codec bounds (RequestFieldError) names itself. undefined: `err`
 * is a fault, not a refusal.
 */
export function refusal(err: unknown, messageType: string): string | undefined {
  if (err instanceof DecodeError) return `request: not a ${messageType} (${echo(err.message)})`;
  // its message is the codec's own: the field's name and the rule, caller input already cut short
  if (err instanceof Error && err.name === "RequestFieldError") return err.message;
  return undefined;
}
