/**
 * How MAX_MEMORY_MB is shared between the owned table, the replica table and the blocked
 * cache (issue 10, item 3), and that the replica table stays inside its share.
 */
import t from "tap";
import { newStep } from "../../../src/algorithms/index.js";
import { fixedWindow } from "../../../src/algorithms/fixed-window.js";
import { MIN_BYTES } from "../../../src/shard/table/key-bytes.js";
import {
  BLOCKED_CACHE_SHARE,
  CHARGE_IDS_SHARE,
  RELEASED_LEASES_SHARE,
  FINE_LAPSES_SHARE,
  SHARES_SHARE,
  TOP_BLOCKED_SHARE,
  memoryBudget,
  oldSpaceBytes,
  STATES_HEAP_SHARE,
  YOUNG_GENERATION_BYTES,
  youngGenerationBytes,
} from "../../../src/shard/table/memory-budget.js";
import { mergeStates } from "../../../src/shard/records/merge-states.js";
import { stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const MiB = 1024 * 1024;
const T0 = 1_800_000_000_000;

t.test("alone: all of it for the owned table", async (t) => {
  t.same(
    memoryBudget(64, { clustered: false, replicas: 1 }),
    {
      totalBytes: 64 * MiB,
      ownedBytes: 64 * MiB - 3 * MiB,
      replicaBytes: 0,
      blockedCacheBytes: 0,
      topBlockedBytes: MiB,
      sharesBytes: 0,
      releasedLeasesBytes: MiB / 2,
      fineLapsesBytes: MiB / 2,
      replicaFineLapsesBytes: 0,
      chargeIdsBytes: MiB,
    },
    "the owned table, the top offenders' 1/64, released leases' 1/128, their fine lapses' 1/128 and charge ids' 1/64",
  );
});

t.test("unset: a share of the old space, the heap limit less the young generation", async (t) => {
  const b = memoryBudget(undefined, { clustered: false, replicas: 1 }, 1000 * MiB);
  t.equal(b.totalBytes, Math.floor((1000 * MiB - YOUNG_GENERATION_BYTES) * STATES_HEAP_SHARE));
  // --max-old-space-size=64 reads 112 MiB on Node 22, 256 on 24: 30 % of the 64 MiB old space, not of the limit.
  t.equal(memoryBudget(undefined, { clustered: false, replicas: 1 }, 64 * MiB + YOUNG_GENERATION_BYTES).totalBytes, Math.floor(64 * MiB * STATES_HEAP_SHARE));
  // smaller semi-spaces (--max-old-space-size=64 --max-semi-space-size=1 reads 67 MiB)
  t.equal(oldSpaceBytes(67 * MiB, youngGenerationBytes(24, "--max-semi-space-size=1")), 64 * MiB);
  t.equal(oldSpaceBytes(100 * MiB, 192 * MiB), 50 * MiB, "a limit below the young generation (never seen): half of it");
});

t.test("the young generation: three semi-spaces, 16 MiB by default on Node 22, 64 MiB on 24, else as set", async (t) => {
  t.equal(youngGenerationBytes(22, ""), 48 * MiB, "Node 22: --max-old-space-size=64 reads 112 MiB");
  t.equal(youngGenerationBytes(24, "--max-old-space-size=64"), 192 * MiB, "Node 24: it reads 256 MiB");
  t.equal(youngGenerationBytes(24, "--max-semi-space-size=8"), 24 * MiB, "set: 64 + 24 = the 88 MiB both read");
  t.equal(youngGenerationBytes(22, "--max-semi-space-size=4 --max-semi-space-size 2"), 6 * MiB, "the last one set wins, as in Node");
});

t.test("clustered: the blocked cache's share, then owned : replicas = 1 : R - 1", async (t) => {
  for (const replicas of [1, 2, 3, 5]) {
    const b = memoryBudget(160, { clustered: true, replicas });
    t.equal(b.blockedCacheBytes, 160 * MiB * BLOCKED_CACHE_SHARE, `R=${replicas}: blocked cache`);
    t.equal(b.topBlockedBytes, 160 * MiB * TOP_BLOCKED_SHARE, `R=${replicas}: top offenders`);
    t.equal(b.sharesBytes, 160 * MiB * SHARES_SHARE, `R=${replicas}: shares of other owners' keys`);
    t.equal(b.releasedLeasesBytes, 160 * MiB * RELEASED_LEASES_SHARE, `R=${replicas}: released concurrency leases`);
    t.equal(b.fineLapsesBytes, 160 * MiB * FINE_LAPSES_SHARE, `R=${replicas}: fine lapses of held slots`);
    t.equal(b.replicaFineLapsesBytes, 160 * MiB * FINE_LAPSES_SHARE * (replicas - 1), `R=${replicas}: as much again for each replica copy's fine lapses`);
    t.equal(b.chargeIdsBytes, 160 * MiB * CHARGE_IDS_SHARE, `R=${replicas}: charge ids`);
    t.equal(
      b.ownedBytes + b.replicaBytes + b.blockedCacheBytes + b.sharesBytes + b.topBlockedBytes + b.releasedLeasesBytes + b.fineLapsesBytes + b.replicaFineLapsesBytes + b.chargeIdsBytes,
      160 * MiB,
      `R=${replicas}: the shares add up to MAX_MEMORY_MB`,
    );
    t.ok(Math.abs(b.replicaBytes - b.ownedBytes * (replicas - 1)) <= replicas, `R=${replicas}: replicas get R - 1 times the owned share`);
  }
});

t.test("the smallest MAX_MEMORY_MB with the most replicas still makes valid tables", async (t) => {
  const b = memoryBudget(16, { clustered: true, replicas: 16 });
  t.ok(b.ownedBytes >= MIN_BYTES && b.replicaBytes >= MIN_BYTES);
  t.doesNotThrow(() => new StateTable(1000, T0, b.ownedBytes));
  t.doesNotThrow(() => new StateTable(1000, T0, b.replicaBytes));
});

t.test("replicated and restored states are counted like decided ones: the bound holds", async (t) => {
  const b = memoryBudget(16, { clustered: true, replicas: 2 });
  const replicas = new StateTable(5_000_000, T0, b.replicaBytes);
  const owned = new StateTable(5_000_000, T0, b.ownedBytes);
  const big = (i: number) => stateKeyOf(0, 3600, `${"中".repeat(256)}.${"中".repeat(500)}${i}`);
  // Copies arrive through mergeStates, as REPLICATE and a snapshot's restore store them.
  for (let batch = 0; batch < 40; batch++) {
    const records = Array.from({ length: 250 }, (_, j) => ({
      key: big(batch * 250 + j),
      state: { a: T0, b: 3, c: 0, expiresAt: T0 / 1000 + 3600, origin: 7, born: 0 },
    }));
    mergeStates(replicas, records, T0);
    t.ok(replicas.bytes <= replicas.maxBytes, `after ${(batch + 1) * 250} copies: ${replicas.bytes} of ${replicas.maxBytes}`);
  }
  t.ok(replicas.evictions > 0, `${replicas.evictions} copies evicted to stay in the replica share`);
  // The owned table is untouched by the copies and still decides exactly.
  const out = newStep();
  for (let r = 1; r <= 3; r++) owned.decide("k", fixedWindow, 3, 60_000, T0, out);
  t.equal(out.remaining, 0);
  t.equal(owned.size, 1);
});
