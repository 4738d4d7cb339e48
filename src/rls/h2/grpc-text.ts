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
