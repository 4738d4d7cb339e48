/**
 * What is left of NODE_OPTIONS once tap's processinfo loader is taken out (untapped.ts): the
 * forms tap writes, and every other option as the caller wrote it. That a started process
 * really runs without the loader is child-processes.process.test's.
 */
import t from "tap";
import { withoutTapLoader } from "./untapped.js";

const LOADER = "file:///ringlimit/node_modules/@tapjs/processinfo/dist/esm/import.mjs";

t.test("tap's loader goes, in each form tap writes it", async (t) => {
  // What processinfo wrote into a node's NODE_OPTIONS (Node 24): each token quoted, its own appended.
  t.equal(
    withoutTapLoader(`"--max-old-space-size=64" "--import" "/tmp/hook.mjs" "--import=${LOADER}"`),
    `"--max-old-space-size=64" "--import" "/tmp/hook.mjs"`,
  );
  // What tap gives a test file: its loader alone.
  t.equal(withoutTapLoader(`"--import=${LOADER}"`), "");
  t.equal(withoutTapLoader(`--import ${LOADER} --max-semi-space-size=16`), "--max-semi-space-size=16");
  t.equal(withoutTapLoader("--import=@tapjs/processinfo/import --no-warnings"), "--no-warnings");
  t.equal(withoutTapLoader("--loader /x/node_modules/@tapjs/processinfo/dist/esm/loader-legacy.mjs"), "");
});

t.test("every other option stays as written", async (t) => {
  t.equal(withoutTapLoader(""), "");
  t.equal(withoutTapLoader("--max-old-space-size=64"), "--max-old-space-size=64");
  t.equal(withoutTapLoader(`--import "/a dir/hook.mjs" --title="x \\" y"`), `--import "/a dir/hook.mjs" --title="x \\" y"`);
  // A package whose name only starts like tap's is not tap's loader.
  t.equal(withoutTapLoader("--import=@tapjs/processinfo-fork/import"), "--import=@tapjs/processinfo-fork/import");
});
