import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import type { ApiKeyVerifier } from "../../auth/api-keys.js";
import { ENVELOPE, envelopeHead, errorBody } from "../envelope.js";
import { endWithError, Errors, type ErrorDef } from "../errors.js";
import type { IdGenerator } from "../ids.js";

/** GET /top's `n`: default and bound (docs/api.md). */
export const TOP_DEFAULT_N = 20;
export const TOP_MAX_N = 1000;

export interface TopQuery {
  n: number;
  namespace: string | undefined;
  /** the key's namespace prefixes; null: any */
  prefixes: string[] | null;
}
export interface TopResult {
  entries: { namespace: string; identifier: string; count: number; error: number }[];
  /** members asked (this node included) and how many answered */
  members: number;
  answered: number;
}

/**
 * GET /top?n=&namespace=: the identifiers blocked most over the last one to two minutes,
 * merged across the ring (docs/api.md), behind the bearer keys; a scoped key sees only its
 * namespaces. `top` asks the ring (the composition root gives it); a caller that leaves
 * before the answer is simply not written to.
 */
export function topEndpoint(verifier: ApiKeyVerifier, ids: IdGenerator, clock: () => number, top: (q: TopQuery) => Promise<TopResult>) {
  return (res: HttpResponse, req: HttpRequest): void => {
    const scope = verifier.scopeOf(req.getHeader("authorization"));
    if (scope === undefined) {
      return refuse(res, ids, clock, Errors.unauthorized);
    }
    const nText = req.getQuery("n");
    const namespaceText = req.getQuery("namespace");
    const n = nText === undefined || nText === "" ? TOP_DEFAULT_N : /^[0-9]{1,4}$/.test(nText) ? Number(nText) : NaN;
    if (!(n >= 1 && n <= TOP_MAX_N)) return refuse(res, ids, clock, Errors.badRequest, { field: "n", message: `must be an integer from 1 to ${TOP_MAX_N}` });
    const namespace = namespaceText === undefined || namespaceText === "" ? undefined : namespaceText;
    if (namespace !== undefined && !scope.admits(namespace)) return refuse(res, ids, clock, Errors.forbidden);
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    top({ n, namespace, prefixes: scope.prefixes === null ? null : [...scope.prefixes] }).then(
      (result) => {
        if (aborted) return;
        res.cork(() =>
          res
            .writeStatus("200 OK")
            .writeHeader("Content-Type", "application/json")
            .end(topBody(ids.ok(), clock(), result)),
        );
      },
      () => {
        if (aborted) return;
        res.cork(() => refuse(res, ids, clock, Errors.internal));
      },
    );
  };
}

function refuse(res: HttpResponse, ids: IdGenerator, clock: () => number, error: ErrorDef, detail?: { field: string; message: string }): void {
  endWithError(res, error, errorBody(ids.error(), clock(), error, detail === undefined ? undefined : [detail]));
}

/** GET /top's body (cold path). */
export function topBody(id: string, timestamp: number, r: TopResult): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.top) +
    '"members":' +
    r.members +
    ',"answered":' +
    r.answered +
    ',"top":' +
    JSON.stringify(r.entries.map((e) => ({ namespace: e.namespace, identifier: e.identifier, blocked: e.count, error: e.error }))) +
    "}}"
  );
}
