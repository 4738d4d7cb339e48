import t from "tap";
import { OwnerDoubts } from "../../../../src/shard/cluster/membership/owner-doubts.js";
import { HashRing } from "../../../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../../../src/shard/ring/state-key.js";

const HOLD = 1000;
const NOW = 1_800_000_000_000;
const FULL = new HashRing(["a", "b", "c"]);

/** A ring key the full ring gives to `owner`. */
function keyOf(owner: string, tag: string): string {
  for (let i = 0; ; i++) {
    const key = ringKeyOf("ns", `${tag}-${i}`);
    if (FULL.owner(key) === owner) return key;
  }
}

t.test("a member dropped silently: the keys it owned are in doubt for the hold, the others never", async (t) => {
  const doubts = new OwnerDoubts(HOLD);
  doubts.dropped("b", NOW);
  doubts.update(new HashRing(["a", "c"]), NOW);
  t.equal(doubts.until, NOW + HOLD, "until: the one number a decision compares");
  for (let i = 0; i < 20; i++) {
    t.ok(doubts.ownerInDoubt(keyOf("b", `b${i}`), NOW), "a key b owned");
    t.notOk(doubts.ownerInDoubt(keyOf("a", `a${i}`), NOW), "a key a owned");
    t.notOk(doubts.ownerInDoubt(keyOf("c", `c${i}`), NOW), "a key c owned");
  }
  t.ok(doubts.ownerInDoubt(keyOf("b", "end"), NOW + HOLD - 1));
  t.notOk(doubts.ownerInDoubt(keyOf("b", "end"), NOW + HOLD), "the hold ends at its time");
  doubts.update(new HashRing(["a", "c"]), NOW + HOLD);
  t.equal(doubts.until, 0, "an ended hold is forgotten at the next update");
});

t.test("each member has its own hold; one back on the ring, or gone for sure, is cleared", async (t) => {
  const doubts = new OwnerDoubts(HOLD);
  doubts.dropped("b", NOW);
  doubts.update(new HashRing(["a", "c"]), NOW);
  doubts.dropped("c", NOW + 500);
  doubts.update(new HashRing(["a"]), NOW + 500);
  t.equal(doubts.until, NOW + 500 + HOLD);
  t.ok(doubts.ownerInDoubt(keyOf("b", "b"), NOW + 600));
  t.ok(doubts.ownerInDoubt(keyOf("c", "c"), NOW + 600));
  t.notOk(doubts.ownerInDoubt(keyOf("b", "b"), NOW + HOLD), "b's hold ended");
  t.ok(doubts.ownerInDoubt(keyOf("c", "c"), NOW + HOLD), "c's has not");

  doubts.update(new HashRing(["a", "c"]), NOW + 600);
  t.notOk(doubts.ownerInDoubt(keyOf("c", "c"), NOW + 600), "c back on the ring: its keys are its own again");
  t.ok(doubts.ownerInDoubt(keyOf("b", "b"), NOW + 600), "b still in doubt");
  doubts.cleared("b");
  doubts.update(new HashRing(["a", "c"]), NOW + 600);
  t.equal(doubts.until, 0, "cleared (it left gracefully, or its process is gone)");
  t.notOk(doubts.ownerInDoubt(keyOf("b", "b"), NOW + 600));
});

t.test("TAKEOVER_HOLD_MS=0: nothing is ever in doubt", async (t) => {
  const doubts = new OwnerDoubts(0);
  doubts.dropped("b", NOW);
  doubts.update(new HashRing(["a", "c"]), NOW);
  t.equal(doubts.until, 0);
  t.notOk(doubts.ownerInDoubt(keyOf("b", "b"), NOW));
});
