// The cold-path calls of one client awaiting their CALL_REPLY. A timer per call
// is fine here: calls are rare (hand-off, membership changes).

import { CallStatus } from "../wire/constants.js";
import { PeerError } from "../errors.js";
import type { CallReply } from "../wire/messages.js";

interface PendingCall {
  resolve: (payload: Buffer) => void;
  reject: (err: PeerError) => void;
  timer: NodeJS.Timeout;
}

export class PendingCalls {
  private readonly calls = new Map<number, PendingCall>();
  private nextId = 0;

  /** Register a call; `send(id)` writes its CALL frame. Settles with the reply, a timeout, or failAll(). */
  start(method: number, timeoutMs: number, send: (id: number) => void): Promise<Buffer> {
    const id = this.nextId;
    this.nextId = (id + 1) >>> 0;
    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.calls.delete(id);
        reject(new PeerError("timeout", `call ${method} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.calls.set(id, { resolve, reject, timer });
      send(id);
    });
  }

  /** A CALL_REPLY arrived; one for a call that timed out already is ignored. */
  settle(reply: CallReply): void {
    const c = this.calls.get(reply.callId);
    if (c === undefined) return;
    this.calls.delete(reply.callId);
    clearTimeout(c.timer);
    if (reply.status === CallStatus.OK) c.resolve(reply.payload);
    else c.reject(new PeerError("remote", reply.payload.toString("utf8")));
  }

  /** The connection is gone: every waiting call fails with `code`. */
  failAll(code: PeerError["code"], message: string): void {
    for (const c of this.calls.values()) {
      clearTimeout(c.timer);
      c.reject(new PeerError(code, message));
    }
    this.calls.clear();
  }
}
