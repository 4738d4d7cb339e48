import t from "tap";
import { MemberLists } from "../../../../src/shard/cluster/membership/member-lists.js";
import { HashRing } from "../../../../src/shard/ring/ring.js";

const four = ["a:1", "b:1", "c:1", "d:1"];
const three = ["a:1", "b:1", "c:1"];

/** What `holder` (given `own`) answers a PROTOCOL_CALL from `asker`, as the link carries it. */
function reply(own: readonly string[], asker: MemberLists): string {
  const server = new MemberLists();
  server.setOwn(own);
  return server.replyTo(asker.requestTag);
}

t.test("an old and a new list, one member apart, relate both ways", (t) => {
  const old = new MemberLists();
  old.setOwn(four);
  const edited = new MemberLists();
  edited.setOwn(three);
  t.equal(old.linked("a:1", reply(three, old)), "lacks", "a holder of four reaching a holder of three: it lacks one");
  t.same([...old.excluded()], ["d:1"], "the member the shorter list leaves out");
  t.equal(edited.linked("b:1", reply(four, edited)), "more", "a holder of three reaching a holder of four: told it lists more");
  t.same([...edited.excluded()], [], "nothing of its own list is left out");
  old.forget("a:1");
  t.same([...old.excluded()], [], "a member down no longer shapes the ring");
  t.end();
});

t.test("the ring every holder builds is the same", (t) => {
  // Scale-out 3 -> 4 half done: a and d hold four, b and c three; everyone is up.
  const lists: Record<string, readonly string[]> = { "a:1": four, "b:1": three, "c:1": three, "d:1": four };
  const rings = Object.entries(lists).map(([self, own]) => {
    const mine = new MemberLists();
    mine.setOwn(own);
    for (const peer of own) if (peer !== self) mine.linked(peer, reply(lists[peer]!, mine));
    const excluded = mine.excluded();
    return new HashRing(own.filter((m) => !excluded.has(m) && mine.other.size === 0)).members.join();
  });
  t.same(new Set(rings), new Set(["a:1,b:1,c:1"]), "one ring, of the members both lists hold");
  t.end();
});

t.test("older tags and lists too far apart", (t) => {
  const mine = new MemberLists();
  mine.setOwn(four);
  const legacy = new MemberLists();
  legacy.setOwn(four);
  t.equal(legacy.replyTo(legacy.digest), legacy.digest, "an older client (no relation marker) gets the bare digest it compares");
  t.equal(mine.linked("b:1", legacy.digest), "same", "an older node of the same list");
  t.equal(mine.linked("b:1", ""), "same", "no tag (PEERS_DNS): nothing compared");
  const far = new MemberLists();
  far.setOwn(["a:1", "x:1", "y:1", "z:1"]);
  t.equal(mine.linked("a:1", far.replyTo(mine.requestTag)), "other", "a list three members apart cannot be told");
  t.ok(mine.other.has("a:1"), "and keeps its member out");
  t.end();
});
