import { algorithmByCode, type Algorithm } from "../algorithms/index.js";
import type { BatchOutcome, Decision, LimitQuery, ReleaseOutcome, ReleaseQuery, ResetOutcome, ResetQuery } from "../decision.js";
import type { TopQuery, TopResult } from "../http/endpoints/top.js";
import type { RlsRequest } from "../rls/wire/messages.js";

/**
 * What crosses between a worker and the state owner by postMessage: the rarer requests (batch,
 * reset, release, GET /top, /metrics), the ring's state for GET /cluster and the answers'
 * ring-version header, and the lifecycle. POST /limit and /limit/charge never come here: they
 * go over the decision rings (byte-ring.ts). An Algorithm is an object with functions, which a
 * structured clone cannot carry: it crosses as its code.
 */
export type WireQuery = Omit<LimitQuery, "algorithm"> & { algorithm: number };
type WireApplied = { limit: number; duration: number; algorithm: number } | null;
export type WireDecision = Omit<Decision, "applied"> & { applied: WireApplied };

export type Call =
  | { op: "batch"; queries: WireQuery[]; now: number }
  | { op: "reset"; query: Omit<ResetQuery, "algorithm"> & { algorithm: number | undefined }; now: number }
  | { op: "release"; query: Omit<ReleaseQuery, "query"> & { query: WireQuery }; now: number }
  | { op: "top"; query: TopQuery }
  | { op: "metrics" }
  | { op: "json"; request: RlsRequest; prefixes: readonly string[] | null };

/** Worker → owner. */
export type FromWorker =
  | { t: "listening"; descriptor: unknown }
  | { t: "call"; id: number; call: Call }
  | { t: "blocked"; notes: [string, string, number][] }
  | { t: "metrics-json"; id: number; json: unknown }
  | { t: "drained"; inFlight: number };

/** What GET /cluster and the answers' headers need of the ring, pushed when it changes. */
export interface DirectoryView {
  self: string;
  version: string;
  members: unknown[];
  policyVersions: Record<string, string | null>;
  software: unknown;
}

/** The policy for a worker's RLS service: a compiled policy's copy (or none), or "owner": resolve there. */
export type WorkerPolicy = { policy: unknown } | "owner";

/** Owner → worker. */
export type ToWorker =
  | { t: "policy"; policy: WorkerPolicy }
  | { t: "reply"; id: number; value: unknown; error?: string }
  | { t: "directory"; view: DirectoryView }
  /** why the node is not ready (GET /ready's `reason`), sent when it changes */
  | { t: "not-ready"; reason: string | undefined }
  | { t: "metrics-json"; id: number }
  | { t: "drain"; deadline?: number }
  | { t: "exit" };

export const toWireQuery = (q: LimitQuery): WireQuery => ({ ...q, algorithm: q.algorithm.code });

function algorithmOf(code: number): Algorithm {
  const a = algorithmByCode(code);
  // Workers and owner run one build: a code the registry lacks is a bug, not a caller's error.
  if (a === undefined) throw new Error(`unknown algorithm code ${code}`);
  return a;
}

export const fromWireQuery = (q: WireQuery): LimitQuery => ({ ...q, algorithm: algorithmOf(q.algorithm) });

export const toWireDecision = (d: Decision): WireDecision => ({
  ...d,
  applied: d.applied === null ? null : { ...d.applied, algorithm: d.applied.algorithm.code },
});

export const fromWireDecision = (d: WireDecision): Decision => ({
  ...d,
  applied: d.applied === null ? null : { ...d.applied, algorithm: algorithmOf(d.applied.algorithm) },
});

export const toWireBatch = (o: BatchOutcome): { decisions: WireDecision[]; degraded: BatchOutcome["degraded"] } => ({
  decisions: o.decisions.map(toWireDecision),
  degraded: o.degraded,
});

export const fromWireBatch = (o: { decisions: WireDecision[]; degraded: BatchOutcome["degraded"] }): BatchOutcome => ({
  decisions: o.decisions.map(fromWireDecision),
  degraded: o.degraded,
});

export const fromWireReset = (q: Extract<Call, { op: "reset" }>["query"]): ResetQuery => ({
  ...q,
  algorithm: q.algorithm === undefined ? undefined : algorithmOf(q.algorithm),
});

export const fromWireRelease = (q: Extract<Call, { op: "release" }>["query"]): ReleaseQuery => ({ ...q, query: fromWireQuery(q.query) });

export type { ResetOutcome, ReleaseOutcome, TopResult };
