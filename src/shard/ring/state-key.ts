import { REQUEST_BOUNDS } from "../../decision.js";

/**
 * Key layout. The ring places a key by (effective namespace, identifier) so every limit of
 * one identifier lives on one node; the state table keys by that plus (algorithm, duration).
 * Both are length-prefixed so no namespace/identifier pair can collide with another
 * whatever characters they hold.
 *
 *   ring key  = `${ns.length}:${ns}${identifier}`
 *   state key = `${algorithmCode}${duration}:` + ring key
 */
export function ringKeyOf(namespace: string, identifier: string): string {
  return namespace.length + ":" + namespace + identifier;
}

export function stateKeyOf(algorithmCode: number, duration: number, ringKey: string): string {
  return algorithmCode + "" + duration + ":" + ringKey;
}

/** The ring key inside a state key: everything after the first colon (no validation: for keys this node built or validated). */
export function ringKeyOfStateKey(stateKey: string): string {
  return stateKey.slice(stateKey.indexOf(":") + 1);
}

/** The (namespace, identifier) a ring key was built from (no validation: for keys this node built or validated). */
export function splitRingKey(ringKey: string): { namespace: string; identifier: string } {
  const colon = ringKey.indexOf(":");
  const end = colon + 1 + Number(ringKey.slice(0, colon));
  return { namespace: ringKey.slice(colon + 1, end), identifier: ringKey.slice(end) };
}

export interface ParsedStateKey {
  algorithmCode: number;
  duration: number;
  ringKey: string;
}

/** Keys arrive from peers in hand-off batches: anything stateKeyOf could not have written is refused. */
export function parseStateKey(key: string): ParsedStateKey | undefined {
  const colon = key.indexOf(":");
  if (colon < 2) return undefined;
  const algorithmCode = key.charCodeAt(0) - 48;
  const digits = key.slice(1, colon);
  const duration = Number(digits);
  const { min, max } = REQUEST_BOUNDS.duration;
  if (!(algorithmCode >= 0 && algorithmCode <= 9) || !Number.isInteger(duration) || !(duration >= min && duration <= max) || String(duration) !== digits)
    return undefined;
  return { algorithmCode, duration, ringKey: key.slice(colon + 1) };
}
