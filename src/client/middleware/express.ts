import type { NextFunction, Request, RequestHandler, Response } from "express";
import { checkRequest, type RateLimitMiddlewareOptions, type Verdict } from "./common.js";
import { acquireSlot } from "./concurrency.js";
import { applyHeaders } from "./policy-headers.js";
import { RouteCost } from "./route-cost.js";

declare global {
  namespace Express {
    interface Locals {
      /** the request's RouteCost, with `cost: "after"` (ringlimit/client/express) */
      ringlimit?: RouteCost;
    }
  }
}

/**
 * Express middleware: one limit per instance, so a route gets its own limit by using its
 * own instance (`app.post("/login", ringLimitExpress({ ..., limit: 5 }), handler)`); several
 * on one route all apply, each with its own item in RateLimit / RateLimit-Policy.
 * Sets RateLimit-Policy and RateLimit on every checked request, and answers 429 with
 * Retry-After and a JSON body when the limit is reached. With `cost: "after"`, the handler
 * reports the cost with `res.locals.ringlimit.settle(actual)`.
 */
export function ringLimitExpress(options: RateLimitMiddlewareOptions<Request>): RequestHandler {
  const { client, ...rule } = options;
  if (rule.concurrency === true) return concurrencyMiddleware(options);
  return (req: Request, res: Response, next: NextFunction) => {
    checkRequest(client, rule, req).then((v) => {
      setHeaders(res, v, rule.policy);
      if (v.settle !== undefined) routeCost(res).add(v.settle);
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
      setHeaders(res, v, rule.policy);
      if (!v.pass) return void res.status(v.status).type("application/json").send(v.body);
      res.once("finish", release);
      res.once("close", release);
      next();
    }, next);
  };
}

function setHeaders(res: Response, v: Verdict, policy: string | undefined): void {
  applyHeaders(
    v,
    policy,
    (name) => res.getHeader(name),
    (name, value) => void res.setHeader(name, value),
  );
}

/** The request's RouteCost, shared by every middleware on the route. */
function routeCost(res: Response): RouteCost {
  return (res.locals.ringlimit ??= new RouteCost());
}

export type { RateLimitMiddlewareOptions, RateLimitRule } from "./common.js";
export { RouteCost } from "./route-cost.js";
