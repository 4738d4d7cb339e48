import t from "tap";
import { OwnerDoubts } from "../../../../src/shard/cluster/membership/owner-doubts.js";
import { IN_DOUBT, JOINING, LEAVING, MOVED, OWNER_DOWN, ownership, type OwnershipView } from "../../../../src/shard/cluster/routing/ownership.js";
import { HashRing } from "../../../../src/shard/ring/ring.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";

const NOW = 1_800_000_000_000;
const SELF = "a:7000";
const OTHER = "b:7000";
const CODE = 2;
const DURATION = 60;

/** A view with plain fields, as the member pool and the coordinator keep them. */
function fakeView(
  overrides: Partial<{ frozen: boolean; joining: boolean; held: string[]; fences: Record<string, number>; down: string[]; doubts: OwnerDoubts }> = {},
) {
  const held = new Set(overrides.held ?? []);
  const doubts = overrides.doubts ?? new OwnerDoubts(0);
  const view: OwnershipView = {
    self: SELF,
    ring: new HashRing([SELF, OTHER]),
    frozen: overrides.frozen ?? false,
    joining: overrides.joining ?? false,
    holds: (code, duration, ringKey) => held.has(stateKeyOf(code, duration, ringKey)),
    fencedUntil: (member) => overrides.fences?.[member],
    isUp: (member) => !(overrides.down ?? []).includes(member),
    get doubtUntil() {
      return doubts.until;
    },
    ownerInDoubt: (ringKey, now) => doubts.ownerInDoubt(ringKey, now),
  };
  return view;
}

/** A ring key the two-member ring gives to `owner`. */
function keyOwnedBy(owner: string, tag: string): string {
  const ring = new HashRing([SELF, OTHER]);
  for (let i = 0; ; i++) {
    const key = ringKeyOf("ns", `${tag}-${i}`);
    if (ring.owner(key) === owner) return key;
  }
}

const mine = keyOwnedBy(SELF, "mine");
const theirs = keyOwnedBy(OTHER, "theirs");

t.test("a key this node owns is decided here, from either origin", async (t) => {
  for (const origin of ["local", "forwarded"] as const) {
    t.same(ownership(fakeView(), mine, CODE, DURATION, NOW, origin), { kind: "decide", stray: false }, origin);
  }
});

t.test("moved: a key another member owns", async (t) => {
  t.same(ownership(fakeView(), theirs, CODE, DURATION, NOW, "local"), { kind: "forward", owner: OTHER }, "local: forwarded to its owner");
  t.same(
    ownership(fakeView(), theirs, CODE, DURATION, NOW, "forwarded"),
    { kind: "decide", stray: true },
    "forwarded: decided here (never forwarded twice), as a stray to reconcile",
  );
});

t.test("owner down: the local path fails open instead of forwarding", async (t) => {
  const verdict = ownership(fakeView({ down: [OTHER] }), theirs, CODE, DURATION, NOW, "local");
  t.equal(verdict, OWNER_DOWN);
  t.match(verdict, { kind: "fail_open", reason: "peer_unavailable" });
  t.same(ownership(fakeView({ down: [OTHER] }), mine, CODE, DURATION, NOW, "local"), { kind: "decide", stray: false }, "its own keys are unaffected");
});

t.test("fenced: a forwarded key that moved to a member added moments ago fails open", async (t) => {
  const fenced = fakeView({ fences: { [OTHER]: NOW + 1 } });
  t.equal(ownership(fenced, theirs, CODE, DURATION, NOW, "forwarded"), MOVED);
  t.match(MOVED, { kind: "fail_open", reason: "handoff" });
  t.same(ownership(fenced, theirs, CODE, DURATION, NOW + 1, "forwarded"), { kind: "decide", stray: true }, "the fence ends at its time");
  t.same(ownership(fenced, theirs, CODE, DURATION, NOW, "local"), { kind: "forward", owner: OTHER }, "the local path forwards to the new member");
  t.same(ownership(fenced, mine, CODE, DURATION, NOW, "forwarded"), { kind: "decide", stray: false }, "keys still owned here are decided");
});

t.test("leaving: nothing is decided here, keys owned elsewhere are still forwarded", async (t) => {
  const leaving = fakeView({ frozen: true });
  t.equal(ownership(leaving, mine, CODE, DURATION, NOW, "local"), LEAVING);
  t.equal(ownership(leaving, mine, CODE, DURATION, NOW, "forwarded"), LEAVING);
  t.equal(ownership(leaving, theirs, CODE, DURATION, NOW, "forwarded"), LEAVING, "not even a stray");
  t.same(ownership(leaving, theirs, CODE, DURATION, NOW, "local"), { kind: "forward", owner: OTHER });
  t.match(LEAVING, { kind: "fail_open", reason: "handoff" });
});

t.test("joining: only keys whose state has arrived are decided", async (t) => {
  const joining = fakeView({ joining: true, held: [stateKeyOf(CODE, DURATION, mine)] });
  t.same(ownership(joining, mine, CODE, DURATION, NOW, "local"), { kind: "decide", stray: false }, "state held: decided");
  t.equal(ownership(joining, mine, CODE, 61, NOW, "local"), JOINING, "another limit of the same key: its state is not here");
  t.equal(ownership(joining, mine, 0, DURATION, NOW, "forwarded"), JOINING, "another algorithm, forwarded");
  t.equal(ownership(joining, keyOwnedBy(SELF, "other"), CODE, DURATION, NOW, "local"), JOINING);
  t.same(ownership(joining, theirs, CODE, DURATION, NOW, "local"), { kind: "forward", owner: OTHER }, "other members' keys are forwarded");
});

t.test("an empty ring (this node left, alone): nothing to forward to, nothing decided here", async (t) => {
  const view = { ...fakeView({ frozen: true }), ring: new HashRing([]) };
  t.equal(ownership(view, mine, CODE, DURATION, NOW, "local"), LEAVING);
});

t.test("verdicts are shared values: the rule allocates nothing per request", async (t) => {
  const view = fakeView();
  t.equal(ownership(view, theirs, CODE, DURATION, NOW, "local"), ownership(view, keyOwnedBy(OTHER, "again"), CODE, DURATION, NOW, "local"));
  t.equal(ownership(view, mine, CODE, DURATION, NOW, "local"), ownership(view, keyOwnedBy(SELF, "again"), CODE, DURATION, NOW, "forwarded"));
});

t.test("a member dropped without a sign it stopped: its keys are neither decided here nor forwarded until the hold ends", async (t) => {
  const GONE = "c:7000";
  const HOLD = 1000;
  const before = new HashRing([SELF, OTHER, GONE]);
  const after = new HashRing([SELF, OTHER]);
  const keyOf = (was: string, now: string, tag: string): string => {
    for (let i = 0; ; i++) {
      const key = ringKeyOf("ns", `${tag}-${i}`);
      if (before.owner(key) === was && after.owner(key) === now) return key;
    }
  };
  const takenOver = keyOf(GONE, SELF, "to-self");
  const movedOn = keyOf(GONE, OTHER, "to-other");
  const doubts = new OwnerDoubts(HOLD);
  doubts.dropped(GONE, NOW);
  doubts.update(after, NOW);
  const view = fakeView({ doubts });
  t.equal(doubts.until, NOW + HOLD);
  for (const origin of ["local", "forwarded"] as const) {
    t.equal(ownership(view, takenOver, CODE, DURATION, NOW, origin), IN_DOUBT, `${origin}: a key it owned and this node now owns`);
    t.equal(ownership(view, movedOn, CODE, DURATION, NOW + HOLD - 1, origin), IN_DOUBT, `${origin}: a key it owned that another member now owns`);
    t.same(ownership(view, takenOver, CODE, DURATION, NOW + HOLD, origin), { kind: "decide", stray: false }, `${origin}: taken over once the hold ends`);
  }
  t.match(IN_DOUBT, { kind: "fail_open", reason: "peer_unavailable", blockHeld: true });
  t.same(ownership(view, movedOn, CODE, DURATION, NOW + HOLD, "local"), { kind: "forward", owner: OTHER }, "forwarded to its next owner once the hold ends");
  t.same(
    ownership(view, keyOf(SELF, SELF, "kept"), CODE, DURATION, NOW, "local"),
    { kind: "decide", stray: false },
    "keys the dropped member did not own are unaffected",
  );
  t.same(ownership(view, keyOf(OTHER, OTHER, "kept"), CODE, DURATION, NOW, "local"), { kind: "forward", owner: OTHER });

  doubts.cleared(GONE);
  doubts.update(after, NOW);
  t.equal(doubts.until, 0, "back, or gone for sure: no hold");
  t.same(ownership(view, takenOver, CODE, DURATION, NOW, "local"), { kind: "decide", stray: false });

  const back = new OwnerDoubts(HOLD);
  back.dropped(GONE, NOW);
  back.update(before, NOW);
  t.equal(back.until, 0, "a member on the ring again is not in doubt");
  const off = new OwnerDoubts(0);
  off.dropped(GONE, NOW);
  off.update(after, NOW);
  t.equal(off.until, 0, "TAKEOVER_HOLD_MS=0: no hold");
});
