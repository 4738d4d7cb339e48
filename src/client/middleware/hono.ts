import type { Context, MiddlewareHandler } from "hono";
import { checkRequest, type RateLimitMiddlewareOptions } from "./common.js";
import { acquireSlot } from "./concurrency.js";

/**
 * Hono middleware: one limit per instance (`app.use("/api/*", ringLimitHono({ ... }))`, or
 * per route). Sets RateLimit-Policy and RateLimit on every checked request, and answers 429
 * with Retry-After and a JSON body when the limit is reached.
 */
export function ringLimitHono(options: RateLimitMiddlewareOptions<Context>): MiddlewareHandler {
  const { client, ...rule } = options;
  if (rule.concurrency === true) return concurrencyMiddleware(options);
  return async (c, next) => {
    const v = await checkRequest(client, rule, c);
    for (const [name, value] of v.headers) c.header(name, value);
    if (!v.pass) return c.body(v.body, v.status as 429 | 503, { "Content-Type": "application/json" });
    await next();
  };
}

/** `concurrency: true`: a slot per request, released when the handlers are done, errors included (a body streamed after that is not waited for). */
function concurrencyMiddleware(options: RateLimitMiddlewareOptions<Context>): MiddlewareHandler {
  const { client, ...rule } = options;
  return async (c, next) => {
    const { verdict: v, release } = await acquireSlot(client, rule, c);
    for (const [name, value] of v.headers) c.header(name, value);
    if (!v.pass) return c.body(v.body, v.status as 429 | 503, { "Content-Type": "application/json" });
    try {
      await next();
    } finally {
      release();
    }
  };
}

export type { RateLimitMiddlewareOptions, RateLimitRule } from "./common.js";
