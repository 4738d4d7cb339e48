import t from "tap";
import { ALGORITHM_NAMES, ALGORITHMS, DEFAULT_ALGORITHM, algorithmByCode, algorithmByName } from "../../src/algorithms/index.js";

t.test("the registry follows the one list of names: code = position, every name resolves", async (t) => {
  t.same(
    ALGORITHMS.map((a) => [a.code, a.name]),
    ALGORITHM_NAMES.map((name, code) => [code, name]),
  );
  for (const name of ALGORITHM_NAMES) t.equal(algorithmByName(name)?.name, name);
  for (const [code, name] of ALGORITHM_NAMES.entries()) t.equal(algorithmByCode(code)?.name, name);
  t.equal(algorithmByCode(ALGORITHM_NAMES.length), undefined);
  t.equal(algorithmByName("FIXED-WINDOW"), undefined, "names are exact");
  t.ok(ALGORITHM_NAMES.includes(DEFAULT_ALGORITHM));
});
