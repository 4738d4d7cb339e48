import type { Logger } from "../../../logger.js";
import type { PeerClient } from "../../../peer/index.js";
import { CallMethod, MAX_BATCH_BYTES, encodeStates, mergeStates, recordBytes, type StateRecord } from "../wire/call-methods.js";
import { parseStateKey } from "../../ring/state-key.js";
import type { StateTable } from "../../table/state-table.js";
import { forEachKeySliced } from "./sliced-scan.js";
import type { FineLapses } from "../../../algorithms/fine-lapses.js";
import { encodeStatesWithFine, fineRecordBytes } from "../../records/fine-records.js";
import { mergeWithFine, type FineStore } from "../../local/fine-store.js";

/**
 * Hand-off batches awaiting their acknowledgement, per receiving member, so the receiver's
 * merge overlaps the next batch's encoding (measured, 1 M keys with the Map-based table:
 * 1 in flight ≈ 107 k keys/s, 4 in flight ≈ 141 k keys/s; with the current table ≈ 530 k keys/s).
 */
const BATCHES_IN_FLIGHT = 4;

export interface HandOffReport {
  sent: number;
  failed: number;
  ms: number;
}

export interface HandOffTarget {
  self: string;
  /** the member that should hold a ring key */
  ownerOf(ringKey: string): string | undefined;
  peer(member: string): PeerClient | undefined;
  /** unix ms: batches not sent by then are kept */
  deadline: number;
  logger: Logger;
  /** the owner's fine lapses (fine-store.ts): they go with their states to a member of protocol 15 */
  fineLapses?: FineStore;
}

/**
 * Send every state in `table` whose owner is another member to that member, which merges
 * it. A state is read and deleted in the same synchronous step as it is put in a batch, so
 * nothing counted afterwards is lost with it; a batch that fails is merged back.
 */
export async function handOverStates(table: StateTable, target: HandOffTarget): Promise<HandOffReport> {
  const started = Date.now();
  const byOwner = await keysByOwner(table, target);
  let sent = 0;
  let failed = 0;
  await Promise.all(
    [...byOwner].map(async ([owner, ownerKeys]) => {
      const client = target.peer(owner);
      let i = 0;
      // Per link: a member below protocol 15 gets the buckets alone (MERGE_STATES), as before.
      const store = client?.link.supports("FINE_LAPSES") === true ? target.fineLapses : undefined;
      const nextBatch = (): { states: StateRecord[]; fine: { key: string; fine: FineLapses }[] } => {
        const states: StateRecord[] = [];
        const fine: { key: string; fine: FineLapses }[] = [];
        let bytes = 0;
        for (; i < ownerKeys.length && bytes < MAX_BATCH_BYTES; i++) {
          const key = ownerKeys[i]!;
          const state = table.get(key);
          if (state === undefined) continue;
          table.delete(key);
          states.push({ key, state });
          bytes += recordBytes(key);
          // Read in the step that deletes the state: no decision in between, so it refines what is sent.
          const f = store?.peek(key, state, Date.now());
          target.fineLapses?.drop(key);
          if (f === undefined) continue;
          fine.push({ key, fine: f });
          bytes += fineRecordBytes(key, f.s.length);
        }
        return { states, fine };
      };
      const sender = async () => {
        for (let batch = nextBatch(); batch.states.length > 0; batch = nextBatch()) {
          try {
            if (client === undefined || client.state !== "up" || Date.now() >= target.deadline) throw new Error("owner unreachable");
            const timeout = Math.max(50, target.deadline - Date.now());
            if (store === undefined) await client.call(CallMethod.MERGE_STATES, encodeStates(batch.states, Date.now()), timeout);
            else await client.call(CallMethod.MERGE_FINE, encodeStatesWithFine(batch.states, batch.fine, Date.now()), timeout);
            sent += batch.states.length;
          } catch (err) {
            failed += batch.states.length;
            mergeBack(table, target.fineLapses, batch);
            target.logger.warn({ owner, keys: batch.states.length, err: (err as Error).message }, "state hand-off batch failed; keeping the states");
          }
        }
      };
      await Promise.all(Array.from({ length: BATCHES_IN_FLIGHT }, sender));
    }),
  );
  return { sent, failed, ms: Date.now() - started };
}

/** A batch that was not handed over, back into this node's table with its overlays (same clock: as they were). */
function mergeBack(table: StateTable, store: FineStore | undefined, batch: { states: StateRecord[]; fine: { key: string; fine: FineLapses }[] }): void {
  const now = Date.now();
  if (store === undefined) {
    mergeStates(table, batch.states, now);
    return;
  }
  const fine = new Map(batch.fine.map((f) => [f.key, f.fine]));
  for (const { key, state } of batch.states) mergeWithFine(table, store, key, state, fine.get(key), now);
}

/** The keys to move, grouped by new owner; scanned a slice per event-loop turn. */
async function keysByOwner(table: StateTable, target: HandOffTarget): Promise<Map<string, string[]>> {
  const byOwner = new Map<string, string[]>();
  await forEachKeySliced(table, (keys) => {
    for (const key of keys) {
      const parsed = parseStateKey(key);
      const owner = parsed && target.ownerOf(parsed.ringKey);
      if (owner === undefined || owner === target.self) continue;
      let list = byOwner.get(owner);
      if (list === undefined) byOwner.set(owner, (list = []));
      list.push(key);
    }
  });
  return byOwner;
}
