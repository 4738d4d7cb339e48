import { algorithmByName } from "../../algorithms/index.js";
import type { AppliedLimit, LimitQuery } from "../../decision.js";
import type { Policy } from "../../policy/types.js";

/** What the owner's policy does to one item of a batch (docs/policy.md, Overrides). */
export interface ItemPolicy {
  /** the limit applied instead of the item's; null: the item's own */
  readonly applied: AppliedLimit | null;
  /** blocked by the policy itself: limit 0, or a cost above the applied limit (no state touched) */
  readonly denied: boolean;
  /** a block is answered allowed (the entry's shadow, or SHADOW_MODE) */
  readonly shadow: boolean;
}

const PLAIN: ItemPolicy = Object.freeze({ applied: null, denied: false, shadow: false });
const SHADOW: ItemPolicy = Object.freeze({ applied: null, denied: false, shadow: true });

/**
 * Each item's override, looked up once per batch on the owner; undefined when no override
 * is loaded and SHADOW_MODE is off (nothing to look up). The same rules as one decision
 * (LocalDecider): every item gets its own most specific override.
 */
export function itemPoliciesOf(policy: Policy | undefined, shadowMode: boolean, queries: readonly LimitQuery[]): ItemPolicy[] | undefined {
  if (!shadowMode && (policy === undefined || policy.overrideCount === 0)) return undefined;
  return queries.map((q) => {
    // An RLS descriptor's key: its rules govern it, not overrides.
    if (q.overridable !== true) return PLAIN;
    const o = policy?.matchOverride(q.namespace, q.identifier);
    const shadow = shadowMode || o?.shadow === true;
    if (o === undefined || o.limit === undefined) return shadow ? SHADOW : PLAIN;
    const applied: AppliedLimit = {
      limit: o.limit,
      duration: o.duration ?? q.duration,
      algorithm: o.algorithm === undefined ? q.algorithm : algorithmByName(o.algorithm)!,
    };
    return { applied, denied: applied.limit === 0 || q.cost > applied.limit, shadow };
  });
}
