import t from "tap";
import { parseStateKey, ringKeyOf, ringKeyOfStateKey, splitRingKey, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { prng } from "../../harness/prng.js";

t.test("ring keys are length-prefixed: no two (namespace, identifier) pairs collide", async (t) => {
  t.not(ringKeyOf("ab", "c"), ringKeyOf("a", "bc"));
  t.not(ringKeyOf("1:a", "b"), ringKeyOf("1", ":ab"));
  const rnd = prng(5);
  const alphabet = ["a", "1", ":", ".", "é", "😀", "0"];
  const seen = new Map<string, string>();
  for (let i = 0; i < 20_000; i++) {
    const word = () => Array.from({ length: Math.floor(rnd() * 5) }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join("");
    const ns = word();
    const id = word();
    const key = ringKeyOf(ns, id);
    const pair = JSON.stringify([ns, id]);
    if (seen.has(key) && seen.get(key) !== pair) t.fail(`${pair} and ${seen.get(key)} share ${key}`);
    seen.set(key, pair);
  }
  t.ok(seen.size > 1000, `${seen.size} distinct pairs`);
});

t.test("a ring key splits back into its namespace and identifier, and a state key gives back its ring key", async (t) => {
  const rnd = prng(7);
  const alphabet = ["a", "1", ":", ".", "é", "😀", "0"];
  const word = (min: number) => Array.from({ length: min + Math.floor(rnd() * 6) }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join("");
  const wrong: string[] = [];
  for (let i = 0; i < 5_000; i++) {
    const namespace = word(1);
    const identifier = word(1);
    const ringKey = ringKeyOf(namespace, identifier);
    const split = splitRingKey(ringKey);
    if (split.namespace !== namespace || split.identifier !== identifier) wrong.push(`split ${ringKey}`);
    if (ringKeyOfStateKey(stateKeyOf(2, 3600, ringKey)) !== ringKey) wrong.push(`state key of ${ringKey}`);
  }
  t.same(wrong, [], "5,000 random pairs");
});

t.test("state keys round-trip through parseStateKey", async (t) => {
  for (const code of [0, 1, 2, 3]) {
    for (const duration of [1, 60, 3600, 31_536_000]) {
      for (const ringKey of [ringKeyOf("ns", "id"), ringKeyOf("a:b", "9:9"), ringKeyOf("用户", ""), ringKeyOf("", "x")]) {
        t.same(parseStateKey(stateKeyOf(code, duration, ringKey)), { algorithmCode: code, duration, ringKey });
      }
    }
  }
});

t.test("anything else is refused, not misread", async (t) => {
  // Peer data (hand-off batches) goes through here: a duration outside the request bounds, or
  // not written the way stateKeyOf writes it, is refused.
  for (const bad of ["", ":", "0:", "5", "a60:2:nsid", "060x:2:ns", "0-5:2:ns", "00:2:ns", "01.5:2:ns", "0 5:2:ns", "05e1:2:ns", "031536001:2:ns", "x"]) {
    t.equal(parseStateKey(bad), undefined, JSON.stringify(bad));
  }
});
