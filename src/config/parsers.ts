import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";

/**
 * How a setting's text is read and checked (config.ts and its envoyproxy/ratelimit names,
 * envoy-ratelimit.ts): each parser throws a ConfigError naming the variable.
 */
export type Parser = (raw: string, name: string) => unknown;

export const int =
  (min: number, max: number): Parser =>
  (raw, name) => {
    if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `expected an integer from ${min} to ${max}, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new ConfigError(name, `expected an integer from ${min} to ${max}, got ${n}`);
    return n;
  };
export const str: Parser = (raw, name) => {
  if (raw.trim() === "") throw new ConfigError(name, "must not be empty");
  return raw.trim();
};
export const list: Parser = (raw) =>
  raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

export const bool: Parser = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
};
export const oneOf =
  (values: string[]): Parser =>
  (raw, name) => {
    if (!values.includes(raw.trim())) throw new ConfigError(name, `expected one of ${values.join(", ")}, got "${raw}"`);
    return raw.trim();
  };

/**
 * A certificate and its key: each readable and parseable, set together, and matching, so a
 * wrong file stops start-up with its variable's name instead of a TLS error later.
 */
export function checkTlsFiles(certName: string, certFile: string | undefined, keyName: string, keyFile: string | undefined): void {
  const cert = certFile === undefined ? undefined : certificate(certName, certFile);
  const key = keyFile === undefined ? undefined : privateKey(keyName, keyFile);
  if (cert === undefined && key === undefined) return;
  if (cert === undefined || key === undefined)
    throw new ConfigError(cert === undefined ? certName : keyName, `${certName} and ${keyName} must be set together`);
  try {
    createSecureContext({ cert, key });
  } catch {
    throw new ConfigError(keyName, `${keyFile} is not the private key of the certificate in ${certName}`);
  }
}

export function readPem(name: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(name, `cannot read file ${file} (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`);
  }
}

/** A CA bundle's certificates one by one: OpenSSL reads only the first of two PEM blocks written without a newline between them. */
export function certificatesOf(pem: Buffer): string[] {
  return pem.toString("latin1").match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
}

/** A PEM file of one certificate or more (a CA bundle): each must parse. */
export function certificate(name: string, file: string): Buffer {
  const pem = readPem(name, file);
  const blocks = certificatesOf(pem);
  try {
    if (blocks.length === 0) throw new Error("no certificate");
    for (const block of blocks) new X509Certificate(block);
  } catch {
    throw new ConfigError(name, `${file} is not a PEM certificate`);
  }
  return pem;
}

export function privateKey(name: string, file: string): Buffer {
  const pem = readPem(name, file);
  try {
    createPrivateKey(pem);
  } catch {
    throw new ConfigError(name, `${file} is not an unencrypted PEM private key`);
  }
  return pem;
}

/** Thrown when start-up configuration is wrong; main prints `message` as one line. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = "ConfigError";
  }
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = Object.freeze({ ms: 1, s: 1000, m: 60_000, h: 3_600_000 });

/**
 * A duration as Go writes it (envoyproxy/ratelimit's settings: `10s`, `1m30s`, `500ms`), or a bare
 * number of milliseconds; the result in ms, from min to max.
 */
export const durationMs =
  (min: number, max: number): Parser =>
  (raw, name) => {
    const text = raw.trim();
    let ms: number;
    if (/^\d+$/.test(text)) ms = Number(text);
    else {
      if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) throw new ConfigError(name, `expected a duration such as 10s, 1m30s or 500ms, got "${raw}"`);
      ms = 0;
      for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * DURATION_UNITS_MS[m[2]!]!;
    }
    if (ms < min || ms > max) throw new ConfigError(name, `expected a duration from ${min} ms to ${max} ms, got ${ms} ms`);
    return Math.round(ms);
  };
