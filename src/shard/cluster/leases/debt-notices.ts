import type { PeerClient } from "../../../peer/index.js";
import type { HashRing } from "../../ring/ring.js";
import { CallMethod } from "../wire/call-methods.js";
import { encodeDebtNotice } from "../wire/lease-wire.js";
import type { Shares } from "./shares.js";

interface NoticeView {
  readonly self: string;
  readonly ring: HashRing;
  client(member: string): PeerClient | undefined;
}

/**
 * Debt on a key members answer from their shares (docs/shares.md, Debt). Invariant: once a
 * charge has taken the owner's count past the limit, no member answers the key from a share
 * in that window; every node answers 429 until the debt is paid back, as one node would.
 * A share by rule or a grant is answered without a message, so the owner tells each member
 * up (DEBT_NOTICE, the state key and the window) when a charge crosses into debt, and does
 * not wait: the charge is counted already. A member whose notice is lost (its call timed out)
 * may still answer what it held of the window: at most one share and its grants, as a member
 * that misses a RESET_NOTICE. A member of a protocol without charges is sent none: it is
 * never sent a charge either, and answers from its share as before.
 */
export function announceDebt(view: NoticeView, stateKey: string, windowStart: number, timeoutMs: number): void {
  const payload = encodeDebtNotice(stateKey, windowStart);
  for (const member of view.ring.members) {
    if (member === view.self) continue;
    const client = view.client(member);
    if (client === undefined || client.state !== "up" || !client.link.supports("CHARGE")) continue;
    client.call(CallMethod.DEBT_NOTICE, payload, timeoutMs).catch(() => undefined);
  }
}

/** DEBT_NOTICE from `from`: checked like any peer data by its row's decoder (a notice out of bounds is refused whole), then applied to this node's shares. */
export function receiveDebtNotice(shares: Shares, { stateKey, windowStart }: { stateKey: string; windowStart: number }, from: string): void {
  shares.indebted(stateKey, windowStart, from, Date.now());
}
