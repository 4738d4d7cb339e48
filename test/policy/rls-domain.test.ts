/**
 * RLS matching as envoyproxy/ratelimit matches, over the good fixtures: a key with its
 * value before a wildcard before the key alone, depth N only, no backing up, wildcards in
 * file order, replaces, share_threshold's counters, and bounded metric keys.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { loadPolicy, type RlsMatch } from "../../src/policy/index.js";

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../test/policy/fixtures/good");
const policy = loadPolicy(FIXTURES);
const entries = (pairs: string[][]) => pairs.map(([key, value]) => ({ key: key!, value: value! }));
const match = (domain: string, ...pairs: string[][]): RlsMatch | undefined => policy.matchRequest(domain, [entries(pairs)])[0];

t.test("which rule a descriptor gets", async (t) => {
  // [domain, entries, the rule's limit (undefined: no rule)]
  const table: [string, string[][], number | undefined][] = [
    ["basic", [], undefined],
    ["basic", [["key1", "something"]], undefined],
    ["basic", [["key1", "value1"]], undefined],
    [
      "basic",
      [
        ["key1", "value1"],
        ["subkey1", "something"],
      ],
      5,
    ],
    [
      "basic",
      [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
      ],
      10,
    ],
    [
      "basic",
      [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
        ["deeper", "x"],
      ],
      undefined,
    ],
    ["basic", [["key2", "something"]], 20],
    ["basic", [["key2", "value2"]], 30],
    [
      "basic",
      [
        ["key2", "value2"],
        ["subkey", "subvalue"],
      ],
      undefined,
    ],
    [
      "basic",
      [
        ["key5", "value5"],
        ["subkey5", "x"],
      ],
      undefined,
    ],
    [
      "basic",
      [
        ["key5", "value5"],
        ["subkey5", "x"],
        ["subsubkey5", "y"],
      ],
      3,
    ],
    ["basic", [["remote_address", "50.0.0.5"]], 0],
    ["basic", [["remote_address", "50.0.0.6"]], 10],
    ["basic", [["KEY2", "x"]], undefined],
    ["no-such-domain", [["key2", "x"]], undefined],
    // wildcards
    ["wildcard", [["wild", "foo"]], 20],
    ["wildcard", [["wild", "foobar"]], 20],
    ["wildcard", [["wild", "fo"]], undefined],
    ["wildcard", [["noWild", "foo"]], 21],
    ["wildcard", [["noWild", "foobar"]], undefined],
    ["wildcard", [["noVal", "anything"]], 22],
    ["wildcard", [["noVal", ""]], 22],
    ["wildcard", [["midWild", "barb"]], 23],
    ["wildcard", [["midWild", "bar-anything-b"]], 23],
    ["wildcard", [["midWild", "bar-b-c"]], undefined],
    ["wildcard", [["multi", "svc-a-ep-b-rpc"]], 24],
    ["wildcard", [["multi", "svceprpc"]], 24],
    ["wildcard", [["multi", "svc-rpc-ep"]], undefined],
    // the exact value first, then the first wildcard in file order, then the key alone
    ["wildcard", [["path", "/api/v1"]], 1],
    ["wildcard", [["path", "/api/v2"]], 2],
    ["wildcard", [["path", "/api/x.json"]], 2],
    ["wildcard", [["path", "/static/x.json"]], 4],
    ["wildcard", [["path", "/static/x"]], 5],
    // nested wildcards, and the walk never backs up to the key alone
    [
      "wildcard",
      [
        ["tenant", "t-1"],
        ["user", "admin-7"],
      ],
      100,
    ],
    [
      "wildcard",
      [
        ["tenant", "t-1"],
        ["user", "bob"],
      ],
      10,
    ],
    [
      "wildcard",
      [
        ["tenant", "x-1"],
        ["user", "bob"],
      ],
      undefined,
    ],
    [
      "wildcard",
      [
        ["tenant", "x-1"],
        ["other", "o"],
      ],
      8,
    ],
    [
      "wildcard",
      [
        ["tenant", "t-1"],
        ["other", "o"],
      ],
      undefined,
    ],
  ];
  for (const [domain, pairs, limit] of table) {
    t.equal(match(domain, ...pairs)?.rule.limit, limit, `${domain} ${JSON.stringify(pairs)}`);
  }
});

t.test("each descriptor of a request is matched apart, in order", async (t) => {
  const got = policy.matchRequest("basic", [entries([["key2", "a"]]), entries([["nothing", "x"]]), entries([["key2", "value2"]])]);
  t.same(
    got.map((m) => m?.rule.limit),
    [20, undefined, 30],
  );
});

t.test("replaces drops the named rule when both match one request", async (t) => {
  const specific = entries([
    ["key_1", "value_1"],
    ["user", "bkthomps"],
  ]);
  const replacing = entries([
    ["key_2", "value_2"],
    ["user", "bkthomps"],
  ]);
  t.same(
    policy.matchRequest("replaces", [specific]).map((m) => m?.rule.limit),
    [5],
    "alone, the named rule applies",
  );
  t.same(
    policy.matchRequest("replaces", [replacing]).map((m) => m?.rule.limit),
    [10],
  );
  t.same(
    policy.matchRequest("replaces", [specific, replacing]).map((m) => m?.rule.limit),
    [undefined, 10],
    "together, the replaced one is dropped",
  );
  t.same(
    policy.matchRequest("replaces", [replacing, specific]).map((m) => m?.rule.limit),
    [10, undefined],
    "in either order",
  );
  t.same(policy.matchRequest("replaces", [specific])[0]?.rule.name, "specific_limit");
  t.same(policy.matchRequest("replaces", [replacing])[0]?.rule.replaces, ["specific_limit"]);
});

t.test("counter keys: one per value, one per shared wildcard, and one-to-one with the entries", async (t) => {
  const key = (domain: string, ...pairs: string[][]) => match(domain, ...pairs)?.counterKey;
  t.equal(key("share", ["files", "files/a.pdf"]), "files_files/*", "share_threshold: the pattern");
  t.equal(key("share", ["files", "files/b.csv"]), "files_files/*", "every value under it shares one counter");
  t.equal(key("share", ["docs", "docs/a"]), "docs_docs/a", "without it, each value counts apart");
  t.not(key("share", ["docs", "docs/a"]), key("share", ["docs", "docs/b"]));
  t.equal(key("share", ["route", "api/users"], ["method", "GET"]), "route_api/*.method_GET");
  t.equal(key("share", ["file", "test1"]), "file_test1", "an exact value beats the shared wildcard");
  t.equal(key("share", ["file", "test2"]), "file_test*");
  t.equal(key("share", ["multiroute", "svc-a-ep-b-rpc"]), "multiroute_svc*ep*rpc");
  t.not(key("share", ["plain", "a"]), key("share", ["plain", "b"]), "share_threshold without a wildcard: each value apart");
  t.equal(key("basic", ["key1", "value1"], ["subkey1", "subvalue1"]), "key1_value1.subkey1_subvalue1");
  t.equal(key("basic", ["remote_address", "10.0.0.1"]), "remote\\_address_10\\.0\\.0\\.1", "`.` `_` `\\` `*` are escaped");
  // A value holding the separators cannot pose as other entries, nor as a shared pattern.
  t.not(key("wildcard", ["tenant", "t-1.user_x"], ["user", "y"]), key("wildcard", ["tenant", "t-1"], ["user", "x.user_y"]));
  t.not(key("share", ["plain", "files/*"]), "plain_files/*");
  t.equal(key("share", ["plain", "a*"]), "plain_a\\*");
});

t.test("metric keys carry request values only where detailed_metric or value_to_metric ask", async (t) => {
  const metric = (domain: string, ...pairs: string[][]) => match(domain, ...pairs)?.metricKey;
  t.equal(metric("basic", ["key2", "anything"]), "basic.key2", "the key alone: rolled up");
  t.equal(metric("basic", ["key2", "value2"]), "basic.key2_value2");
  t.equal(metric("wildcard", ["wild", "foobar"]), "wildcard.wild_foo*", "a wildcard: its pattern");
  t.equal(metric("metrics", ["rollup", "x"]), "metrics.rollup");
  t.equal(
    metric("metrics", ["route", "/a"], ["http_method", "GET"], ["user_id", "u1"]),
    "metrics.route_/a.http_method_GET.user_id",
    "value_to_metric: those levels only",
  );
  t.equal(metric("metrics", ["detailed", "d"], ["user", "u1"]), "metrics.detailed_d.user_u1", "detailed_metric: every level");
  t.equal(metric("share", ["route", "api/users"], ["method", "GET"]), "share.route_api/*.method", "share_threshold keeps the pattern, value_to_metric or not");
  t.equal(
    match("metrics", ["route", "/a"], ["http_method", "GET"], ["user_id", "u1"])?.rule.metricKey,
    "metrics.route.http_method.user_id",
    "the rule's own key: no values",
  );
});

t.test("a match that depends on no request value is one object, reused", async (t) => {
  t.equal(match("basic", ["key2", "value2"]), match("basic", ["key2", "value2"]));
  t.not(match("basic", ["key2", "a"]), match("basic", ["key2", "a"]), "the key alone builds its counter key");
});
