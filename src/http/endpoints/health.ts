import type { TemplatedApp } from "uWebSockets.js";

export type Readiness = "ready" | "not ready" | "draining";

/**
 * GET /health (the process is alive) and GET /ready (200 when serving with the ring known;
 * 503 while starting, joining, draining or without a quorum, with the reason in the body), without auth, on the main port and on the
 * admin port (METRICS_PORT), where probes reach them over plain HTTP even with TLS on.
 */
export function serveHealth(
  app: TemplatedApp,
  readiness: () => Readiness,
  policyLoaded: () => boolean = () => true,
  notReadyReason: () => string | undefined = () => undefined,
): void {
  // envoyproxy/ratelimit's probe, which Envoy Gateway's Deployment uses for liveness too: 200
  // while the process serves (a ring without quorum is no reason to restart it), 500 once it
  // drains, and before a first policy with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
  app.get("/healthcheck", (res) => {
    const ok = readiness() !== "draining" && policyLoaded();
    res
      .writeStatus(ok ? "200 OK" : "500 Internal Server Error")
      .writeHeader("Content-Type", "text/plain")
      .end(ok ? "OK" : "NOT OK");
  });
  app.get("/health", (res) => {
    res.writeStatus("200 OK").writeHeader("Content-Type", "application/json").end('{"status":"ok"}');
  });
  app.get("/ready", (res) => {
    const state = readiness();
    // The reason is the node's own text (no caller's data in it): it tells an operator what to fix.
    const reason = state === "not ready" ? notReadyReason() : undefined;
    res
      .writeStatus(state === "ready" ? "200 OK" : "503 Service Unavailable")
      .writeHeader("Content-Type", "application/json")
      .end(reason === undefined ? `{"status":"${state}"}` : JSON.stringify({ status: state, reason }));
  });
}
