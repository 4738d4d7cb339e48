import { getHeapStatistics } from "node:v8";
import { MIN_BYTES } from "./key-bytes.js";

/** Without MAX_MEMORY_MB, limit states may use this share of V8's old space (--max-old-space-size). */
export const STATES_HEAP_SHARE = 0.3;
/**
 * What V8's heap_size_limit counts beside the old space: the young generation, three
 * semi-spaces of --max-semi-space-size, whose default grew with V8: 16 MiB on 64-bit Node 22,
 * 64 MiB on Node 24 (`--max-old-space-size=64` reads a heap limit of 112 MiB on 22 and 256 MiB
 * on 24; with `--max-semi-space-size=8`, 88 MiB on both). Our states live in the old space; 30 %
 * of the whole limit was 52 % of a 64 MiB old space on Node 22, and a flood of maximal keys
 * killed such a node on a loaded CI machine (heap OOM); Node 24's 192 MiB, counted as 48, made it
 * 97 % and killed it every time.
 */
export function youngGenerationBytes(nodeMajor: number, nodeFlags: string): number {
  const set = [...nodeFlags.matchAll(/--max-semi-space-size[= ](\d+)/g)].at(-1)?.[1];
  const semiSpaceMiB = set !== undefined ? Number(set) : nodeMajor >= 24 ? 64 : 16;
  return 3 * semiSpaceMiB * 1024 * 1024;
}

/** This process's young generation: its Node and the flags it was started with. */
export const YOUNG_GENERATION_BYTES = youngGenerationBytes(
  Number(process.versions.node.split(".")[0]),
  [...process.execArgv, process.env.NODE_OPTIONS ?? ""].join(" "),
);

/** The old space V8 may grow to: its heap limit less the young generation (half the limit should that leave nothing). */
export const oldSpaceBytes = (heapLimitBytes: number, youngBytes = YOUNG_GENERATION_BYTES): number =>
  heapLimitBytes > youngBytes ? heapLimitBytes - youngBytes : heapLimitBytes / 2;
/** Of the bytes for limit states, the share a forwarding node's blocked cache may use. */
export const BLOCKED_CACHE_SHARE = 1 / 16;
/** Of the same bytes, the share of a member's shares of keys other members own (shard/cluster/leases/); 0 alone. */
export const SHARES_SHARE = 1 / 64;
/** Of the same bytes, the share of the top offenders' summaries (GET /top), every node. */
export const TOP_BLOCKED_SHARE = 1 / 64;

/** Of the same bytes, the share of an owner's memory of released concurrency leases (shard/local/released-leases.ts), every node. */
export const RELEASED_LEASES_SHARE = 1 / 128;
/** Of the same bytes, the share of an owner's fine lapses of held concurrency slots (shard/local/fine-store.ts), every node. */
export const FINE_LAPSES_SHARE = 1 / 128;

/** Of the same bytes, the share of an owner's memory of charge ids (shard/local/charge-ids.ts), every node. */
export const CHARGE_IDS_SHARE = 1 / 64;

/** Byte bounds for every store of limit states on one node; they add up to `totalBytes`. */
export interface MemoryBudget {
  totalBytes: number;
  /** the table of states this node owns */
  ownedBytes: number;
  /** the table of other owners' copies (REPLICAS > 1); 0 without replicas */
  replicaBytes: number;
  /** the blocked cache of a forwarding node; 0 alone */
  blockedCacheBytes: number;
  /** the summaries of identifiers blocked most (GET /top) */
  topBlockedBytes: number;
  /** this member's shares of keys other members own; 0 alone */
  sharesBytes: number;
  /** the owner's memory of released concurrency leases */
  releasedLeasesBytes: number;
  /** the owner's fine lapses of held concurrency slots */
  fineLapsesBytes: number;
  /** the fine lapses of the replicas' concurrency slots (REPLICAS > 1): FINE_LAPSES_SHARE for each copy kept; 0 without replicas */
  replicaFineLapsesBytes: number;
  /** the owner's memory of charge ids and their answers */
  chargeIdsBytes: number;
}

/**
 * How MAX_MEMORY_MB (else 30 % of V8's old space, which follows --max-old-space-size) is
 * shared (issue 10: MAX_KEYS alone let maximal keys, ~3.5 KB each, take a 256 MB heap down in
 * 13 s; the rest of the heap is for requests in flight, peer buffers and hand-off batches).
 *
 * The top offenders' summaries (GET /top) get 1/64, released concurrency leases 1/128, their fine lapses 1/128 (and as much again for each replica copy kept), charge ids 1/64; in a cluster the blocked cache gets 1/16 and the shares 1/64. With REPLICAS = R, what is left is shared by the
 * owned table and the replica table 1 : R − 1: on a balanced ring a node keeps R − 1 copies
 * of other owners' states for each state it owns, so both tables fill at the same key count
 * and neither can crowd the other out (R = 2: half and half). Each table gets at least
 * MIN_BYTES (only a heap of a few MB with many replicas comes near it).
 */
export function memoryBudget(
  maxMemoryMb: number | undefined,
  cluster: { clustered: boolean; replicas: number },
  heapLimitBytes = getHeapStatistics().heap_size_limit,
): MemoryBudget {
  const totalBytes = maxMemoryMb !== undefined ? maxMemoryMb * 1024 * 1024 : Math.floor(oldSpaceBytes(heapLimitBytes) * STATES_HEAP_SHARE);
  const blockedCacheBytes = cluster.clustered ? Math.floor(totalBytes * BLOCKED_CACHE_SHARE) : 0;
  const sharesBytes = cluster.clustered ? Math.floor(totalBytes * SHARES_SHARE) : 0;
  const topBlockedBytes = Math.floor(totalBytes * TOP_BLOCKED_SHARE);
  const releasedLeasesBytes = Math.floor(totalBytes * RELEASED_LEASES_SHARE);
  const fineLapsesBytes = Math.floor(totalBytes * FINE_LAPSES_SHARE);
  const chargeIdsBytes = Math.floor(totalBytes * CHARGE_IDS_SHARE);
  const replicas = cluster.clustered ? cluster.replicas : 1;
  const replicaFineLapsesBytes = fineLapsesBytes * (replicas - 1);
  const tables = totalBytes - blockedCacheBytes - sharesBytes - topBlockedBytes - releasedLeasesBytes - fineLapsesBytes - replicaFineLapsesBytes - chargeIdsBytes;
  const ownedBytes = Math.max(MIN_BYTES, Math.floor(tables / replicas));
  const replicaBytes = replicas > 1 ? Math.max(MIN_BYTES, tables - Math.floor(tables / replicas)) : 0;
  return {
    totalBytes: Math.max(
      totalBytes,
      ownedBytes + replicaBytes + blockedCacheBytes + sharesBytes + topBlockedBytes + releasedLeasesBytes + fineLapsesBytes + replicaFineLapsesBytes + chargeIdsBytes,
    ),
    ownedBytes,
    replicaBytes,
    blockedCacheBytes,
    topBlockedBytes,
    sharesBytes,
    releasedLeasesBytes,
    fineLapsesBytes,
    replicaFineLapsesBytes,
    chargeIdsBytes,
  };
}
