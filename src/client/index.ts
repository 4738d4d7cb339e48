// ringlimit/client: the ring-aware client of a ringlimit cluster (docs/client.md).
// Middleware for Fastify, Express and Hono: ringlimit/client/fastify, /express, /hono.
export { RingLimitClient, CLIENT_DEFAULTS } from "./client.js";
export type { Acquisition } from "./concurrency/acquire.js";
export { ALGORITHM_NAMES } from "../algorithms/registry.js";
export type {
  AlgorithmName,
  AnswerSource,
  ChargeRequest,
  ChargeResult,
  ClientLogger,
  ClientStats,
  DegradedEvent,
  LimitData,
  LimitRequest,
  LimitResult,
  RateLimitHeaders,
  Reservation,
  ReleaseRequest,
  ResetRequest,
  ResetResult,
  RingLimitClientOptions,
} from "./types.js";
