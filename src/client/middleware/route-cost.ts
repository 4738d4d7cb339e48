import type { ChargeResult } from "../types.js";

/**
 * What a route's handler reports its cost through (docs/client.md, Cost after the response):
 * `settle(actual)` settles every rule with `cost: "after"` on the request, each charging or
 * refunding the difference from its estimate (reserve-then-settle). Express: `res.locals.ringlimit`,
 * Fastify: `request.ringlimit`, Hono: `c.get("ringlimit")`.
 */
export class RouteCost {
  private readonly pending: ((actual: number) => Promise<ChargeResult | undefined>)[] = [];

  /** a reservation's settle, from the middleware */
  add(settle: (actual: number) => Promise<ChargeResult | undefined>): void {
    this.pending.push(settle);
  }

  /**
   * Charge the actual cost to each reservation (each settles once; a second call does nothing).
   * Never rejects: a charge no node took resolves with `counted: false` or "unknown", as charge() does.
   */
  async settle(actual: number): Promise<(ChargeResult | undefined)[]> {
    const settles = this.pending.splice(0);
    return Promise.all(settles.map((s) => s(actual)));
  }
}
