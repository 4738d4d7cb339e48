// The smallest logger the peer channel needs; a pino logger fits it.

export interface PeerLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

const noop = (): void => {};

/** Used when no logger is given: logging becomes a no-op at construction, not an `if` per call. */
export const NOOP_LOGGER: PeerLogger = Object.freeze({ debug: noop, info: noop, warn: noop });
