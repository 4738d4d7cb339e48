import type { Context, MiddlewareHandler } from "hono";
import { checkRequest, type RateLimitMiddlewareOptions, type Verdict } from "./common.js";
import { acquireSlot } from "./concurrency.js";
import { applyHeaders } from "./policy-headers.js";
import { RouteCost } from "./route-cost.js";

declare module "hono" {
  interface ContextVariableMap {
    /** the request's RouteCost, with `cost: "after"` (ringlimit/client/hono) */
    ringlimit: RouteCost;
  }
}

/**
 * Hono middleware: one limit per instance (`app.use("/api/*", ringLimitHono({ ... }))`, or
 * per route); several on one route all apply, each with its own item in RateLimit /
 * RateLimit-Policy. Sets RateLimit-Policy and RateLimit on every checked request, and answers
 * 429 with Retry-After and a JSON body when the limit is reached. With `cost: "after"`, the
 * handler reports the cost with `c.get("ringlimit").settle(actual)`.
 */
export function ringLimitHono(options: RateLimitMiddlewareOptions<Context>): MiddlewareHandler {
  const { client, ...rule } = options;
  if (rule.concurrency === true) return concurrencyMiddleware(options);
  return async (c, next) => {
    const v = await checkRequest(client, rule, c);
    setHeaders(c, v, rule.policy);
    if (v.settle !== undefined) routeCost(c).add(v.settle);
    if (!v.pass) return c.body(v.body, v.status as 429 | 503, { "Content-Type": "application/json" });
    await next();
  };
}

/** `concurrency: true`: a slot per request, released when the handlers are done, errors included (a body streamed after that is not waited for). */
function concurrencyMiddleware(options: RateLimitMiddlewareOptions<Context>): MiddlewareHandler {
  const { client, ...rule } = options;
  return async (c, next) => {
    const { verdict: v, release } = await acquireSlot(client, rule, c);
    setHeaders(c, v, rule.policy);
    if (!v.pass) return c.body(v.body, v.status as 429 | 503, { "Content-Type": "application/json" });
    try {
      await next();
    } finally {
      release();
    }
  };
}

function setHeaders(c: Context, v: Verdict, policy: string | undefined): void {
  applyHeaders(
    v,
    policy,
    (name) => c.res.headers.get(name) ?? undefined,
    (name, value) => c.header(name, value),
  );
}

function routeCost(c: Context): RouteCost {
  let cost = c.get("ringlimit");
  if (cost === undefined) c.set("ringlimit", (cost = new RouteCost()));
  return cost;
}

export type { RateLimitMiddlewareOptions, RateLimitRule } from "./common.js";
export { RouteCost } from "./route-cost.js";
