import type { LimitRequest, LimitResult, ReleaseRequest, ResetResult } from "../types.js";

/** What acquire() needs of the client (RingLimitClient), named here so the two files do not import each other. */
interface SlotClient {
  limit(request: LimitRequest): Promise<LimitResult>;
  release(request: ReleaseRequest): Promise<ResetResult>;
}

/** A concurrency slot asked for (docs/client.md, Concurrency). */
export interface Acquisition {
  /** whether the request may go ahead: a slot is held, or the check failed open */
  allowed: boolean;
  /** the answer as limit() gave it */
  result: LimitResult;
  /**
   * Free the slot: POST /limit/release with its lease. Idempotent (a second call sends
   * nothing) and never rejects; nothing to free when no slot was held (a 429, a fail-open
   * answer). A release that does not reach the owner leaves the slot to lapse on time.
   */
  release(): Promise<void>;
}

const NOTHING = (): Promise<void> => Promise.resolve();

/** acquire() of RingLimitClient: limit() with the concurrency algorithm, and the release that goes with it. */
export async function acquireOn(client: SlotClient, request: Omit<LimitRequest, "algorithm">): Promise<Acquisition> {
  const result = await client.limit({ ...request, algorithm: "concurrency" });
  const lease = result.data?.lease;
  if (!result.allowed || typeof lease !== "string") return { allowed: result.allowed, result, release: NOTHING };
  let released: Promise<void> | undefined;
  const { namespace, product, identifier, limit, duration } = request;
  const key = { namespace, ...(product !== undefined ? { product } : {}), identifier, limit, duration, algorithm: "concurrency" as const };
  return {
    allowed: true,
    result,
    release: () => (released ??= client.release({ ...key, lease }).then(() => undefined)),
  };
}
