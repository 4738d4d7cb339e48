import type { PeerClient } from "../../../peer/index.js";
import type { HashRing } from "../../ring/ring.js";
import { CallMethod } from "../wire/call-methods.js";
import type { BlockedCache } from "./blocked-cache.js";

/** Ring keys are built from bounded fields (namespace ≤ 256 + product, identifier ≤ 512 characters): far below this. */
const MAX_NOTICE_BYTES = 8 * 1024;

interface NoticeView {
  readonly self: string;
  readonly ring: HashRing;
  client(member: string): PeerClient | undefined;
}

/**
 * Makes a reset visible on every node within a round trip (docs/api.md, POST /limit/reset).
 * Other nodes remember the owner's 429s (BlockedCache) until the window ends; once the
 * owner has reset an identifier it tells every member on its ring (RESET_NOTICE, the ring
 * key) and answers the reset only when each has dropped its blocks of it, or missed the
 * call's deadline (a member that cannot be reached keeps its blocks to their end at worst,
 * as before). A member also ignores, from then on, a block answered to a request it
 * received before the notice: that answer may have left the owner before the reset.
 */
export class ResetNotices {
  constructor(
    private readonly view: NoticeView,
    private readonly blocked: BlockedCache,
    private readonly timeoutMs: number,
  ) {}

  /** On the owner, after resetting `ringKey`: drop this node's blocks of it and tell every other member; resolves when all have answered or failed. */
  announce(ringKey: string): Promise<void> {
    this.blocked.forgetIdentifier(ringKey, Date.now());
    const payload = Buffer.from(ringKey, "utf8");
    const calls: Promise<unknown>[] = [];
    for (const member of this.view.ring.members) {
      if (member === this.view.self) continue;
      const client = this.view.client(member);
      if (client === undefined || client.state !== "up") continue;
      calls.push(client.call(CallMethod.RESET_NOTICE, payload, this.timeoutMs).catch(() => undefined));
    }
    return Promise.all(calls).then(() => undefined);
  }

  /** RESET_NOTICE from the owner of the identifier: drop this node's blocks of the ring key it names, and return that key. */
  received(payload: Buffer): string {
    if (payload.length === 0 || payload.length > MAX_NOTICE_BYTES) throw new RangeError("RESET_NOTICE: not a ring key");
    const ringKey = payload.toString("utf8");
    this.blocked.forgetIdentifier(ringKey, Date.now());
    return ringKey;
  }
}
