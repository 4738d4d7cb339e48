/** Defaults of RingLimitClientOptions, in one place. */
export const CLIENT_DEFAULTS = Object.freeze({
  // ms: a check unanswered by then resolves allowed: failOpen, degraded: true. Above the
  // servers' PEER_TIMEOUT_MS (100 ms by default, src/config.ts; a test holds the two apart):
  // a node that forwards a check to an owner that hangs answers it degraded itself after
  // PEER_TIMEOUT_MS, and that answer must reach the client before its own deadline, or the
  // healthy node is taken for the hung one (issue 32: at 50 ms, one SIGSTOPped node of three
  // made ~3 s of every check degraded, those of the two healthy owners included).
  timeoutMs: 150,
  failOpen: true,
  connections: 16, // keep-alive connections per node
  routing: "owner" as "owner" | "round-robin",
  retryNodeAfterMs: 1000, // ms an unreachable node is skipped (doubling while it stays so, up to 5 s)
  // ms checks issued at start wait for the first GET /cluster: long enough for a cold
  // connection (TCP, TLS, undici's parser compiled on first use) on a loaded machine, where
  // it took 90-150 ms against a 50 ms timeoutMs (load average 28), short enough that a
  // client whose discovery hangs starts checking through its seed URLs within a second.
  discoveryWaitMs: 1000,
  failOpenOnAuthError: false,
});
