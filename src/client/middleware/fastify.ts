import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { RingLimitClient } from "../client.js";
import { checkRequest, type RateLimitRule, type Verdict } from "./common.js";
import { acquireSlot } from "./concurrency.js";
import { applyHeaders } from "./policy-headers.js";
import { RouteCost } from "./route-cost.js";

/** A route's own limit, over the plugin's defaults; false: the route is not limited. */
export type FastifyRouteLimit = Partial<RateLimitRule<FastifyRequest>> | false;

declare module "fastify" {
  interface FastifyContextConfig {
    /** this route's limit (ringlimit/client/fastify) */
    ringlimit?: FastifyRouteLimit;
  }
  interface FastifyRequest {
    /** the request's RouteCost, with `cost: "after"`: the handler calls `request.ringlimit.settle(actual)` */
    ringlimit?: RouteCost;
  }
}

export interface RingLimitFastifyOptions extends Partial<RateLimitRule<FastifyRequest>> {
  client: RingLimitClient;
  /** limit only routes that set `config.ringlimit` (default: every route, with these options) */
  onlyConfiguredRoutes?: boolean;
}

/**
 * Fastify plugin: an onRequest hook on every route of the instance it is registered on.
 * The plugin's options are the default limit; a route changes it, or turns it off, with
 * `config: { ringlimit: { limit: 5 } }` / `config: { ringlimit: false }`. Registered twice
 * (requests per minute, tokens per hour), both apply, each with its own RateLimit item.
 * With `cost: "after"`, the handler reports the cost with `request.ringlimit.settle(actual)`.
 */
const plugin: FastifyPluginAsync<RingLimitFastifyOptions> = async (fastify, options) => {
  const { client, onlyConfiguredRoutes = false, ...defaults } = options;
  // Registered once per limit: two registrations on one instance both apply, and share the property.
  if (!fastify.hasRequestDecorator("ringlimit")) fastify.decorateRequest("ringlimit", undefined);
  const setHeaders = (reply: FastifyReply, v: Verdict, policy: string | undefined) =>
    applyHeaders(
      v,
      policy,
      (name) => reply.getHeader(name),
      (name, value) => void reply.header(name, value),
    );
  fastify.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    const own = request.routeOptions.config?.ringlimit;
    if (own === false || (own === undefined && onlyConfiguredRoutes)) return;
    const rule = { ...defaults, ...own } as Partial<RateLimitRule<FastifyRequest>>;
    if (rule.namespace === undefined || rule.limit === undefined || rule.duration === undefined || rule.key === undefined) {
      throw new Error("ringlimit: namespace, limit, duration and key are needed (plugin options or the route's config.ringlimit)");
    }
    if (rule.concurrency === true) {
      // A slot for the request, released when its response is written or its connection closes (errors included).
      const slot = await acquireSlot(client, rule as RateLimitRule<FastifyRequest>, request);
      if (slot.verdict.pass) {
        reply.raw.once("finish", slot.release);
        reply.raw.once("close", slot.release);
      }
      setHeaders(reply, slot.verdict, rule.policy);
      if (!slot.verdict.pass) return reply.code(slot.verdict.status).type("application/json").send(slot.verdict.body);
      return;
    }
    const v = await checkRequest(client, rule as RateLimitRule<FastifyRequest>, request);
    setHeaders(reply, v, rule.policy);
    if (v.settle !== undefined) (request.ringlimit ??= new RouteCost()).add(v.settle);
    if (!v.pass) return reply.code(v.status).type("application/json").send(v.body);
  });
};

// What fastify-plugin does: the hook applies to the routes of the instance that registers
// the plugin rather than to an encapsulated child only.
(plugin as unknown as Record<symbol, unknown>)[Symbol.for("skip-override")] = true;
(plugin as unknown as Record<symbol, unknown>)[Symbol.for("fastify.display-name")] = "ringlimit";

export const ringLimitFastify = plugin;
export type { RateLimitRule } from "./common.js";
export { RouteCost } from "./route-cost.js";
