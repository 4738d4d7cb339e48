import type { TemplatedApp } from "uWebSockets.js";

export type Readiness = "ready" | "not ready" | "draining";

/**
 * GET /health (the process is alive) and GET /ready (200 when serving with the ring known;
 * 503 while starting, joining or draining), without auth, on the main port and on the
 * admin port (METRICS_PORT), where probes reach them over plain HTTP even with TLS on.
 */
export function serveHealth(app: TemplatedApp, readiness: () => Readiness): void {
  app.get("/health", (res) => {
    res.writeStatus("200 OK").writeHeader("Content-Type", "application/json").end('{"status":"ok"}');
  });
  app.get("/ready", (res) => {
    const state = readiness();
    res
      .writeStatus(state === "ready" ? "200 OK" : "503 Service Unavailable")
      .writeHeader("Content-Type", "application/json")
      .end(`{"status":"${state}"}`);
  });
}
