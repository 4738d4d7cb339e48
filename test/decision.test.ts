// REQUEST_BOUNDS is the one source of the request bounds: the typia tags of the body, the
// 400 messages and the check of forwarded decisions must all agree with it, at every edge.
import t from "tap";
import { ALGORITHM_NAMES } from "../src/algorithms/index.js";
import { DEGRADED_REASONS, REQUEST_BOUNDS } from "../src/decision.js";
import { FIELD_RULES, toLimitQuery } from "../src/http/validation.js";
import { emptyMetrics } from "./harness/metrics.js";
import { InboundHandler } from "../src/shard/cluster/routing/inbound.js";
import { HashRing } from "../src/shard/ring/ring.js";
import { LocalDecider } from "../src/shard/local/local-decider.js";
import { StateTable } from "../src/shard/table/state-table.js";
import { newDecideResult } from "../src/peer/index.js";

const VALID = { namespace: "ns", identifier: "id", limit: 10, duration: 60 };
type Field = keyof typeof REQUEST_BOUNDS;

function http(field: Field, value: unknown) {
  return toLimitQuery({ ...VALID, [field]: value });
}

/** The inbound handler of a one-member cluster: every key is its own. */
function inbound() {
  const self = "self:1";
  const view = {
    self,
    ring: new HashRing([self]),
    frozen: false,
    joining: false,
    holds: () => true,
    fencedUntil: () => undefined,
    isUp: () => true,
    doubtUntil: 0,
    ownerInDoubt: () => false,
  };
  const events = {
    strayState() {},
    memberLeaving() {},
    handoffDone() {},
    peerAuthenticated() {},
    peerClosed() {},
    hold: () => Buffer.alloc(2),
    advertise: async () => Buffer.alloc(0),
    statesRefused() {},
    replicate: () => 0,
    resetApplied: async () => {},
    resetNotice() {},
    debtNotice() {},
    top: () => Buffer.alloc(2),
  };
  const handler = new InboundHandler(view, new LocalDecider(new StateTable(1000, Date.now())), events);
  const out = newDecideResult();
  // A POST /limit key (overridable); an RLS descriptor's (not overridable) takes the RLS wire's uint32 limits.
  return (q: { namespace: string; identifier: string; limit: number; duration: number }, overridable = true) => {
    try {
      handler.decide({ ...q, algorithm: { code: 0 }, cost: 1, overridable }, out, Date.now());
      return true;
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      return false;
    }
  };
}

t.test("integers: typia, the 400 message and the forwarded check agree at each edge", async (t) => {
  const forwarded = inbound();
  for (const field of ["limit", "duration"] as const) {
    const { min, max } = REQUEST_BOUNDS[field];
    t.match(FIELD_RULES[field], `from ${min} to ${max}`, `${field}: the message states the bounds`);
    for (const [value, ok] of [
      [min, true],
      [max, true],
      [min - 1, false],
      [max + 1, false],
      [min + 0.5, false],
    ] as const) {
      const r = http(field, value);
      t.equal(r.ok, ok, `${field}=${value}: HTTP ${ok ? "accepts" : "refuses"}`);
      if (!r.ok) t.same(r.problems, [{ field, message: FIELD_RULES[field] }]);
      if (Number.isInteger(value)) t.equal(forwarded({ ...VALID, [field]: value }), ok, `${field}=${value}: forwarded check agrees`);
    }
  }
  const rls = REQUEST_BOUNDS.chargeLimit.max;
  t.equal(forwarded({ ...VALID, limit: rls }, false), true, "an RLS descriptor's uint32 limit is forwarded");
  t.equal(forwarded({ ...VALID, limit: rls + 1 }, false), false, "and nothing past it");
});

t.test("strings: typia, the 400 message and the forwarded check agree at each edge", async (t) => {
  const forwarded = inbound();
  for (const field of ["namespace", "product", "identifier"] as const) {
    const { min, max } = REQUEST_BOUNDS[field];
    t.match(FIELD_RULES[field], `${min} to ${max} characters`, `${field}: the message states the bounds`);
    for (const [length, ok] of [
      [min, true],
      [max, true],
      [min - 1, false],
      [max + 1, false],
    ] as const) {
      const r = http(field, "x".repeat(length));
      t.equal(r.ok, ok, `${field} of ${length}: HTTP ${ok ? "accepts" : "refuses"}`);
      if (!r.ok) t.same(r.problems, [{ field, message: FIELD_RULES[field] }]);
    }
  }
  // Forwarded requests carry the effective namespace (`namespace.slug`) and the identifier as sent.
  for (const [length, ok] of [
    [REQUEST_BOUNDS.identifier.min, true],
    [REQUEST_BOUNDS.identifier.max, true],
    [REQUEST_BOUNDS.identifier.min - 1, false],
    [REQUEST_BOUNDS.identifier.max + 1, false],
  ] as const) {
    t.equal(forwarded({ ...VALID, identifier: "x".repeat(length) }), ok, `forwarded identifier of ${length}`);
  }
  t.equal(forwarded({ ...VALID, namespace: "" }), false, "forwarded empty namespace");
  t.equal(
    forwarded({ ...VALID, namespace: "n".repeat(REQUEST_BOUNDS.namespace.max) + "." + "p".repeat(REQUEST_BOUNDS.product.max) }),
    true,
    "longest effective namespace",
  );
});

t.test("algorithm names: typia accepts exactly the list the message names", async (t) => {
  t.equal(FIELD_RULES.algorithm, `must be one of ${ALGORITHM_NAMES.join(", ")}`);
  for (const algorithm of ALGORITHM_NAMES) t.ok(toLimitQuery({ ...VALID, algorithm }).ok, algorithm);
  const r = toLimitQuery({ ...VALID, algorithm: "gcra" });
  t.same(r.ok ? undefined : r.problems, [{ field: "algorithm", message: FIELD_RULES.algorithm }]);
});

t.test("every degraded reason has a metric slot", async (t) => {
  const metrics = emptyMetrics();
  for (const reason of DEGRADED_REASONS) metrics.countDegraded(reason);
  const text = await metrics.render();
  for (const reason of DEGRADED_REASONS) t.match(text, `ringlimit_degraded_total{reason="${reason}"} 1`, reason);
});
