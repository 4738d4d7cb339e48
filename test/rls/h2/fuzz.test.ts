/**
 * Coverage-guided fuzzing of the HPACK decoder and the frame parser (fuzz-target.ts says what
 * is fed and what is checked), time-bounded: it asserts that no input breaks an invariant, not
 * how many inputs ran.
 *
 * Why not jazzer.js: @jazzer.js/core 4.0.0 installs, but its only linux-x64 prebuilt addon needs
 * GLIBC 2.38 and this machine (Debian 12) has 2.36; building it from source needs cmake and a
 * compiler toolchain per CI image. So the guidance is our own, from V8 itself: the inspector's
 * Profiler.takePreciseCoverage in binary block mode after every input says which blocks of
 * src/rls/h2 ran; an input that runs a block (or leaves one unrun) in a function where no corpus
 * entry did joins the corpus, and the mutator works from the corpus. It is slower than libFuzzer
 * (an inspector round trip per input) but it is guided, and it runs everywhere node does.
 *
 * FUZZ_MS (default 20000) bounds the run; FUZZ_SEED makes a run's mutations repeatable.
 */
import { readdirSync, readFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { fileURLToPath } from "node:url";
import t from "tap";
import { fuzz } from "./fuzz-target.js";

const CORPUS_DIR = fileURLToPath(new URL("../../../../test/rls/h2/fuzz-corpus/", import.meta.url));
const RUN_MS = Number(process.env.FUZZ_MS ?? 20_000);
/** one input taking this long is a hang: the parsers do work linear in their input */
const HANG_MS = 2_000;
/** no input grows past this: twice the largest block the connection gathers, plus frames */
const MAX_INPUT = 40 * 1024;

function seeds(): Buffer[] {
  return readdirSync(CORPUS_DIR)
    .filter((f) => f.endsWith(".hex"))
    .sort()
    .map((f) =>
      Buffer.from(
        readFileSync(CORPUS_DIR + f, "latin1")
          .replace(/#.*$/gm, "")
          .replace(/\s+/g, ""),
        "hex",
      ),
    );
}

/** xorshift32: a seeded run repeats its mutations */
function rng(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x3f, 0x1f, 0x40, 0x20, 0x0f, 0x09, 0x04, 0x05];

function mutate(input: Buffer, corpus: Buffer[], r: (n: number) => number): Buffer {
  let b = Buffer.from(input);
  for (let k = 1 + r(4); k > 0; k--) {
    const at = b.length === 0 ? 0 : r(b.length);
    switch (r(7)) {
      case 0:
        if (b.length > 0) b[at]! ^= 1 << r(8);
        break;
      case 1:
        if (b.length > 0) b[at] = INTERESTING[r(INTERESTING.length)]!;
        break;
      case 2:
        if (b.length > 0) b[at] = r(256);
        break;
      case 3: {
        const n = 1 + r(8);
        b = Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: n }, () => r(256))), b.subarray(at)]);
        break;
      }
      case 4:
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + r(16)))]);
        break;
      case 5: {
        // splice in a piece of another entry: frames and fields recombine
        const other = corpus[r(corpus.length)]!;
        const from = r(other.length + 1);
        b = Buffer.concat([b.subarray(0, at), other.subarray(from, from + 1 + r(64)), b.subarray(at)]);
        break;
      }
      default: {
        // repeat a piece: floods, long integers, many fields
        const from = r(b.length + 1);
        const piece = b.subarray(from, from + 1 + r(32));
        b = Buffer.concat([b.subarray(0, at), ...Array.from({ length: 1 + r(8) }, () => piece), b.subarray(at)]);
      }
    }
  }
  if (b.length > 0 && r(16) === 0) b[0] ^= 1; // the same bytes to the other target
  return b.length > MAX_INPUT ? b.subarray(0, MAX_INPUT) : b;
}

interface ScriptCoverage {
  url: string;
  functions: { ranges: { startOffset: number; endOffset: number; count: number }[] }[];
}

/** The blocks of src/rls/h2 this input ran and left unrun, as strings; new ones add to `seen`. */
function newFeatures(result: ScriptCoverage[], seen: Set<string>): number {
  let added = 0;
  for (const script of result) {
    if (!script.url.includes("/src/rls/h2/")) continue;
    for (const fn of script.functions) {
      if (fn.ranges[0]!.count === 0) continue; // not run by this input
      for (const range of fn.ranges) {
        const key = `${script.url}:${range.startOffset}:${range.endOffset}:${range.count > 0 ? 1 : 0}`;
        if (!seen.has(key)) {
          seen.add(key);
          added++;
        }
      }
    }
  }
  return added;
}

t.test("HPACK decoder and frame parser under coverage-guided fuzzing", async (t) => {
  const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
  const r = rng(seed);
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  // binary block coverage: counters reset at every take, so each take is one input's
  await session.post("Profiler.startPreciseCoverage", { callCount: false, detailed: true });
  const corpus = seeds();
  t.ok(corpus.length >= 10, "the seed corpus is there");
  const seen = new Set<string>();
  let runs = 0;
  let failure: string | undefined;
  const run = async (input: Buffer): Promise<number> => {
    const started = performance.now();
    try {
      fuzz(input);
    } catch (err) {
      failure = `input ${input.toString("hex")} (FUZZ_SEED=${seed}) threw ${(err as Error).stack ?? String(err)}`;
    }
    const took = performance.now() - started;
    if (failure === undefined && took > HANG_MS) failure = `input ${input.toString("hex")} took ${Math.round(took)} ms`;
    runs++;
    const { result } = (await session.post("Profiler.takePreciseCoverage")) as { result: ScriptCoverage[] };
    return newFeatures(result, seen);
  };
  // the seeds first: each one is a known-good shape and must pass as it stands
  for (const s of corpus) await run(s);
  const stopAt = Date.now() + RUN_MS;
  while (failure === undefined && Date.now() < stopAt) {
    const input = mutate(corpus[r(corpus.length)]!, corpus, r);
    if ((await run(input)) > 0) corpus.push(input);
  }
  await session.post("Profiler.stopPreciseCoverage");
  session.disconnect();
  t.comment(`FUZZ_SEED=${seed}: ${runs} inputs, corpus ${corpus.length}, ${seen.size} block states of src/rls/h2`);
  t.equal(failure, undefined, "no input threw anything but a protocol error, broke a bound or hung");
  // the guidance works: mutation found blocks the seeds did not reach
  t.ok(corpus.length > seeds().length, "the corpus grew from coverage");
});
