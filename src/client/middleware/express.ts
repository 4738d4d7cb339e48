import type { NextFunction, Request, RequestHandler, Response } from "express";
import { checkRequest, type RateLimitMiddlewareOptions } from "./common.js";
import { acquireSlot } from "./concurrency.js";

/**
 * Express middleware: one limit per instance, so a route gets its own limit by using its
 * own instance (`app.post("/login", ringLimitExpress({ ..., limit: 5 }), handler)`).
 * Sets RateLimit-Policy and RateLimit on every checked request, and answers 429 with
 * Retry-After and a JSON body when the limit is reached.
 */
export function ringLimitExpress(options: RateLimitMiddlewareOptions<Request>): RequestHandler {
  const { client, ...rule } = options;
  if (rule.concurrency === true) return concurrencyMiddleware(options);
  return (req: Request, res: Response, next: NextFunction) => {
    checkRequest(client, rule, req).then((v) => {
      for (const [name, value] of v.headers) res.setHeader(name, value);
      if (v.pass) return next();
      res.status(v.status).type("application/json").send(v.body);
    }, next);
  };
}

/** `concurrency: true`: a slot per request, released when the response finishes or the connection closes (errors included). */
function concurrencyMiddleware(options: RateLimitMiddlewareOptions<Request>): RequestHandler {
  const { client, ...rule } = options;
  return (req: Request, res: Response, next: NextFunction) => {
    acquireSlot(client, rule, req).then(({ verdict: v, release }) => {
      for (const [name, value] of v.headers) res.setHeader(name, value);
      if (!v.pass) return void res.status(v.status).type("application/json").send(v.body);
      res.once("finish", release);
      res.once("close", release);
      next();
    }, next);
  };
}

export type { RateLimitMiddlewareOptions, RateLimitRule } from "./common.js";
