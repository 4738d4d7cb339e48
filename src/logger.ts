import { pino, type Logger } from "pino";

export type { Logger };

/**
 * Structured JSON logs to stdout. No per-request line at info: a rate limiter answers
 * far more requests than anyone could read. Anything that looks like a credential is
 * redacted wherever it appears in a logged object.
 */
export function createLogger(level: string, nodeId?: string): Logger {
  return pino({
    level,
    base: nodeId === undefined ? { pid: process.pid } : { pid: process.pid, node: nodeId },
    redact: {
      paths: [
        "authorization",
        "*.authorization",
        "headers.authorization",
        "*.headers.authorization",
        "apiKey",
        "*.apiKey",
        "clusterSecret",
        "*.clusterSecret",
        "config.apiKeys",
        "config.clusterSecret",
      ],
      censor: "[redacted]",
    },
  });
}
