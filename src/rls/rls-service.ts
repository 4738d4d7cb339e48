import type { KeyScope } from "../auth/api-keys.js";
import type { BatchOutcome, Decider, DegradedReason } from "../decision.js";
import type { Policy, RlsDescriptorEntries, RlsRule } from "../policy/types.js";
import { COUNTED, OVER, planItem, record, statusOf, type Item } from "./descriptor-item.js";
import { RLS_ERRORS, type RlsFailure } from "./errors.js";
import { dynamicMetadata } from "./dynamic-metadata.js";
import { rateLimitHeaders } from "./ratelimit-headers.js";
import { requestProblem } from "./request-check.js";
import { givesBackSlots, releaseOldest } from "./lease-release.js";
import type { RlsMetrics } from "./rls-metrics.js";
import { CODE_OK, CODE_OVER_LIMIT, type RlsRequest, type RlsResponse, type RlsStatus } from "./wire/messages.js";

export interface RlsServiceOptions {
  /** FAIL_OPEN: an owner that cannot decide gives OK (true) or UNAVAILABLE (false) */
  failOpen: boolean;
  /** SHADOW_MODE: the overall answer is OK whatever the descriptors say */
  shadowMode: boolean;
  /** RLS_ALL_OR_NOTHING: count a request's descriptors only when every one passes */
  allOrNothing: boolean;
  /** RLS_COUNT_BLOCKED: count every hit, past the limit too (debt), unless a rule's count_blocked says otherwise; RLS_ALL_OR_NOTHING implies false */
  countBlocked?: boolean;
  /** QUOTA_MODE: every rule in quota mode, as its `quota_mode: true` puts it */
  quotaMode?: boolean;
  /** RESPONSE_DYNAMIC_METADATA: answer with dynamic_metadata (dynamic-metadata.ts) */
  responseDynamicMetadata?: boolean;
  /** RLS_RATELIMIT_HEADERS: add draft-10 RateLimit / RateLimit-Policy to response_headers_to_add */
  rateLimitHeaders: boolean;
}

export interface RlsServiceDeps {
  decider: Decider;
  /** the policy in force at this moment (a reload swaps it); undefined: none loaded, every descriptor matches nothing */
  policy: () => Policy | undefined;
  metrics: RlsMetrics;
  countDegraded: (reason: DegradedReason) => void;
}

/**
 * ShouldRateLimit, whatever the transport (gRPC, POST /json): a request's descriptors matched
 * against the policy, each counted on its owner as a POST /limit key is (namespace = domain,
 * identifier = the counter key), and one status per descriptor in request order
 * (docs/envoy.md). Every matching descriptor is counted on its own, as envoyproxy/ratelimit
 * does; the decide() calls are made in one turn, so the peer channel carries a request's
 * forwards to each owner in one frame. With allOrNothing, a request's descriptors are one
 * batch (decideBatch): nothing is counted unless every one passes.
 */
export class RlsService {
  /** A batch (all or nothing) cannot hold a charge: nothing is counted unless every descriptor fits (null). */
  private readonly countBlocked: boolean | null;

  constructor(
    private readonly options: RlsServiceOptions,
    private readonly deps: RlsServiceDeps,
  ) {
    this.countBlocked = options.allOrNothing ? null : options.countBlocked !== false;
  }

  /** `scope` is the caller's key scope (KeyScope.ANY when authentication is off). `done` is called once. */
  shouldRateLimit(request: RlsRequest, scope: KeyScope, reply: (failure: RlsFailure | undefined, response: RlsResponse | undefined) => void): void {
    const done = this.deps.metrics.timed(reply);
    const problem = requestProblem(request);
    if (problem !== undefined) return done({ kind: "invalidArgument", message: problem }, undefined);
    const domain = request.domain!;
    if (!scope.admits(domain)) return done({ kind: "permissionDenied", message: RLS_ERRORS.permissionDenied.message }, undefined);
    const now = Date.now();
    const descriptors = request.descriptors!;
    const entries: RlsDescriptorEntries[] = new Array(descriptors.length);
    for (let i = 0; i < descriptors.length; i++) {
      const list = descriptors[i]!.entries!;
      const plain = new Array<{ key: string; value: string }>(list.length);
      for (let j = 0; j < list.length; j++) plain[j] = { key: list[j]!.key!, value: list[j]!.value ?? "" };
      entries[i] = plain;
    }
    const policy = this.deps.policy();
    const matches = policy === undefined ? undefined : policy.matchRequest(domain, entries);
    // 0 or unset counts 1 (RLS v3)
    const requestHits = request.hits_addend || 1;
    const items: Item[] = new Array(descriptors.length);
    let counted = 0;
    let overBefore = false;
    let giveBacks: Item[] | undefined;
    for (let i = 0; i < descriptors.length; i++) {
      const d = descriptors[i]!;
      const own = d.hits_addend;
      const addend = own !== undefined && own !== null ? (own.value ?? 0) : requestHits;
      // Envoy 1.38's is_negative_hits: the hits are a refund (the count never goes below zero).
      const hits = d.is_negative_hits === true && addend > 0 ? -addend : addend;
      const item = planItem(domain, entries[i]!, d.limit, matches?.[i], hits, now, this.countBlocked);
      if (givesBackSlots(d, item)) (giveBacks ??= []).push(item);
      if (item.kind === COUNTED) counted++;
      else if (item.kind === OVER) overBefore = true;
      items[i] = item;
    }
    const decideRest = (): void => {
      if (counted === 0) return done(undefined, this.answer(request, items, now));
      this.decideAll(items, counted, overBefore, now, (failure) => {
        if (failure !== undefined) return done(failure, undefined);
        done(undefined, this.answer(request, items, now));
      });
    };
    // Slots given back (a stream-done call) are freed before the rest is decided.
    if (giveBacks !== undefined) releaseOldest(this.deps.decider, giveBacks, now, decideRest);
    else decideRest();
  }

  private decideAll(items: Item[], counted: number, overBefore: boolean, now: number, done: (failure: RlsFailure | undefined) => void): void {
    const decider = this.deps.decider;
    if (this.options.allOrNothing && (counted > 1 || overBefore)) {
      // A refund (is_negative_hits) is no part of the batch: it is given back on its own.
      const batch = items.filter((it) => it.kind === COUNTED && it.query!.charge !== true);
      const refunds = items.filter((it) => it.kind === COUNTED && it.query!.charge === true);
      // A descriptor over before counting refuses the whole request: the others are only peeked.
      if (overBefore) for (const it of batch) it.query!.cost = 0;
      else if (batch.length > 0) {
        let pending = refunds.length + 1;
        const finish = () => {
          if (--pending === 0) done(this.degradedFailure(items));
        };
        for (const it of refunds)
          decider.decide(it.query!, now, (d) => {
            record(it, d, now);
            finish();
            return true;
          });
        return decider.decideBatch(
          batch.map((it) => it.query!),
          now,
          (outcome: BatchOutcome) => {
            for (let i = 0; i < batch.length; i++) record(batch[i]!, outcome.decisions[i]!, now);
            finish();
          },
        );
      }
    }
    // The count is set before the first call: a local decision answers synchronously.
    let pending = counted;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (item.kind !== COUNTED) continue;
      // A gRPC call cancelled meanwhile still counts its descriptors (the stream's end is not
      // tracked per descriptor): delivered, as far as the decider is told.
      decider.decide(item.query!, now, (decision) => {
        record(item, decision, now);
        if (--pending === 0) done(this.degradedFailure(items));
        return true;
      });
    }
  }

  /** A fail-open answer is counted; with FAIL_OPEN=false it fails the whole call. */
  private degradedFailure(items: readonly Item[]): RlsFailure | undefined {
    for (const item of items) {
      if (item.degraded === null) continue;
      this.deps.countDegraded(item.degraded);
      if (!this.options.failOpen) {
        const kind = item.degraded === "internal" ? "internal" : "unavailable";
        return { kind, message: RLS_ERRORS[kind].message };
      }
    }
    return undefined;
  }

  private answer(request: RlsRequest, items: readonly Item[], now: number): RlsResponse {
    const domain = request.domain!;
    const statuses: RlsStatus[] = new Array(items.length);
    // The overall code is OVER_LIMIT when a descriptor not in quota mode is over, or when
    // every quota-mode descriptor of the request is (and there is one): quota_mode lets a
    // request through while any of its quotas has room (envoyproxy/ratelimit's rule).
    let over = false;
    let quotas = 0;
    let quotasOver = 0;
    const passed = this.options.responseDynamicMetadata ? new Array<RlsRule["metadata"]>(items.length) : undefined;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const status = statusOf(item, now);
      const rule = item.rule;
      if (rule !== undefined && (item.kind === COUNTED || item.kind === OVER)) {
        const isOver = status.code === CODE_OVER_LIMIT;
        // A rule in shadow mode is counted and answers OK (its override, if any, is the caller's: never shadowed).
        const shadowRule = isOver && rule.shadow;
        if (shadowRule) status.code = CODE_OK;
        const quota = rule.quotaMode === true || this.options.quotaMode === true;
        if (quota) quotas++;
        if (isOver && !shadowRule) {
          if (quota) quotasOver++;
          else over = true;
        }
        if (passed !== undefined && !(isOver && !shadowRule)) passed[i] = rule.metadata;
        if (item.metricKey !== undefined) {
          // A refund is no hit: it counts in no hit total.
          this.deps.metrics.count(
            domain,
            item.metricKey,
            Math.max(0, item.hits),
            rule.limit,
            isOver,
            item.remaining,
            shadowRule || (isOver && this.options.shadowMode),
          );
        }
      }
      statuses[i] = status;
    }
    if (quotas > 0 && quotasOver === quotas) over = true;
    return {
      // SHADOW_MODE: every answer is OK; the statuses still say which descriptors were over.
      overall_code: over && !this.options.shadowMode ? CODE_OVER_LIMIT : CODE_OK,
      statuses,
      response_headers_to_add: this.options.rateLimitHeaders ? rateLimitHeaders(items, now) : [],
      dynamic_metadata: passed === undefined ? undefined : dynamicMetadata(request, passed),
    };
  }
}
