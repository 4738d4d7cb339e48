// Wire constants and defaults of the peer channel, in one place so both ends
// (and anyone reading a packet capture) agree on them.

/** Frame types (the `u8 type` after the length). Anything else closes the connection. */
export const FrameType = {
  HELLO: 1, // client → server: version, nonceC, clientNodeId, serverNodeId (the node it means to reach)
  CHALLENGE: 2, // server → client: nonceS, serverProof
  PROOF: 3, // client → server: clientProof
  READY: 4, // server → client: the server's ZONE (UTF-8, may be empty), the first sealed frame; the connection is now authenticated
  PING: 5, // client → server: f64 timestamp
  PONG: 6, // server → client: the PING's timestamp echoed
  DECIDE: 7, // client → server: a batch of decision requests
  DECIDE_REPLY: 8, // server → client: one answer per item of one DECIDE
  CALL: 9, // client → server: cold-path opaque request
  CALL_REPLY: 10, // server → client: its opaque answer or an error message
} as const;
export type FrameTypeCode = (typeof FrameType)[keyof typeof FrameType];
export const MAX_FRAME_TYPE = 10;

/** `u32 length` counts the type byte, the payload and (after the handshake) the tag, not itself. */
export const FRAME_HEADER_BYTES = 5;

/**
 * Every frame after the handshake ends in this many bytes of HMAC-SHA256 (truncated, as
 * in RFC 2104 §5 / TLS's truncated_hmac) over the per-direction sequence number and the
 * frame. 128 bits: a forger's chance per attempt is 2^-128, and one failure closes the connection.
 */
export const TAG_BYTES = 16;

/**
 * Largest accepted `length`; a bigger one closes the connection before its body arrives.
 * Hand-off batches are cut at 256 KiB (plus one record of at most 64 KiB), which this
 * fits; a DECIDE frame is bounded more tightly by MAX_DECIDE_ITEMS.
 */
export const MAX_FRAME_BYTES = 512 * 1024;

/**
 * Most items one DECIDE frame may carry; a frame with more is refused whole, before any
 * item is decided. Deciding an item costs ~1-13 µs (more when it creates a state), so a
 * frame holds the event loop for well under 10 ms. (Uncapped, one 1 MiB frame of ~60 k
 * minimal items held it ~750 ms.) Writers start a new frame at this count.
 */
export const MAX_DECIDE_ITEMS = 512;

/**
 * Writes of DECIDE frames a link keeps unanswered before the next turns' frames wait for an
 * answer and leave together in one write (decide-queue.ts). A write costs the sender a
 * syscall that carries the loopback or network delivery, and the owner a read and a reply
 * write, whatever it carries; a saturated sender made a frame of 2 decisions per turn. Two,
 * not one, so that a forward at low load (~1 write per round trip or less) never waits.
 */
export const MAX_DECIDE_WRITES_IN_FLIGHT = 2;

/**
 * Largest frame accepted before the handshake completes. The HMAC handshake
 * frames are < 1 KiB; a small cap keeps an unauthenticated socket from making
 * us buffer a megabyte.
 */
export const MAX_HANDSHAKE_FRAME_BYTES = 4096;

/**
 * The newest peer protocol this build speaks; PEER_PROTOCOL_MAX (src/config.ts) may hold a node
 * below it while a cluster is being upgraded. A node speaks every version from PROTOCOL_MIN to
 * its maximum; a link runs at the highest version both ends speak, a ring at the lowest of its
 * links (docs/peer-protocol.md, "Versions"). Protocol 16: CALL method 22, REPLICATE_FINE, an owner's
 * replication batch whose concurrency states carry their fine lapses, so a promoted replica frees
 * a slot at its lease's own second; a link below it gets REPLICATE, the buckets alone, as before.
 * Protocol 15: CALL method 21, MERGE_FINE, a hand-off
 * batch whose concurrency states carry their fine lapses (shard/records/fine-records.ts); a link
 * below it gets MERGE_STATES, the buckets alone, as before. (14 is another feature's number.)
 * Protocol 13: a charge's DECIDE item may carry its
 * charge id (DecideItemFlag.CHARGE_ID: u8 length and the id's ASCII bytes after the identifier),
 * and its DECIDE_REPLY item DecideFlag.DUPLICATE (the owner's remembered answer to an earlier
 * charge with that id: nothing counted now); a node of 12 would refuse the flag. Protocol 12: HELLO's version byte is the lowest
 * version the sender speaks (any from PROTOCOL_MIN up is accepted: the handshake frames keep
 * their form), and the dialer's first CALL, method PROTOCOL_CALL, tells its range and gets the
 * server's; a server of 11 answers it with an error (unknown method), which says "11 only".
 * Also 12: CALL method 19, RELEASE (a concurrency lease freed on its owner:
 * shard/cluster/wire/release-wire.ts), CALL method 20, DEBT_NOTICE (a shared key charged past
 * its limit: members stop answering it from shares; sent with feature CHARGE), and algorithm
 * code 4, concurrency.
 * Protocol 11: a DECIDE item may
 * carry OPENING (the sender's share of the key's window opened empty: it started or reconnected
 * in that window) and its DECIDE_REPLY item GRANTED, a grant of the window counted with the
 * decision (shard/cluster/leases/shares.ts). Protocol 10: CALL method 17,
 * LEASE (a member's share of a key's window runs low: the owner grants more). Protocol 9: an owner holds
 * back one share of each shared limit's window for every other member, which may answer from
 * it without asking (shard/local/share-rule.ts); a node of protocol 8 holds back nothing, so
 * the two must not share a ring. Protocol 12: a DECIDE item may be a charge (DecideItemFlag.CHARGE,
 * REFUND: counted whatever remains, docs/api.md POST /limit/charge), whose BLOCKED reply carries
 * its debt where `remaining` is; a node of protocol 11 would refuse the flags. Protocol 8: READY carries the
 * server's ZONE, which replica placement reads (a node of protocol 7 refuses a non-empty
 * READY: a cluster upgrades as a whole). Protocol 7: the handshake
 * keys from the cluster key (CLUSTER_SECRET stretched by scrypt) instead of the secret's
 * bytes, so a captured CHALLENGE no longer lets anyone test a guess of the secret in
 * microseconds (transcript label "ringlimit peer protocol 3"). Protocol 6: a DECIDE_REPLY
 * item carries a flag byte and, when the owner's policy applied an override, the limit,
 * window and algorithm it applied; a PONG carries the server's policy version; BATCH replies
 * carry the same per item (docs/peer-protocol.md). Protocol 5: a DECIDE frame
 * carries the sender's deadline budget. Protocol 4: state records (MERGE_STATES, REPLICATE)
 * carry ages instead of the sender's clock readings, which a node of protocol 3 would misread
 * by decades. Protocol 3: DECIDE items carry `cost` (protocol 2 introduced the bound
 * handshake and per-frame tags).
 */
export const PROTOCOL_VERSION = 16;
/**
 * The oldest version this build speaks: 11, the release before ranges, whose nodes accept only
 * a HELLO of 11 and run every link at 11. A version that changes the handshake frames must raise
 * this past every version of the old form.
 */
export const PROTOCOL_MIN = 11;
/**
 * What each version added that a node may leave unused: a feature is used on a link only when
 * both ends speak its version (PeerClient.supports), and in a ring only when every member does
 * (the ring's version, MemberPool.supports). A feature of a new version goes here, with the one
 * check at the place that uses it: `supports("X")`. Older ones are always on (PROTOCOL_MIN).
 */
export const FEATURE_VERSIONS = Object.freeze({
  /** CALL method 17: a member asks the owner for more of a key's window */
  LEASE: 10,
  /** DecideItemFlag.OPENING and DecideFlag.GRANTED: an opening grant with a forwarded decision */
  OPENING: 11,
  /** CALL method PROTOCOL_CALL: ranges told after the handshake */
  RANGES: 12,
  /** CALL method 18: a member asks an owner to hold back its share by rule (leases/holders.ts, docs/shares.md); below it an owner holds back for every connected member */
  HOLD: 12,
  /** DecideItemFlag.CHARGE and REFUND: a charge or refund forwarded to its owner (token budgets); a link below it answers a charge 503, not counted */
  CHARGE: 12,
  /** CALL method 19: a concurrency lease released on its owner (shard/cluster/wire/release-wire.ts); a member of 11 is asked none (503) */
  RELEASE: 12,
  /** DecideItemFlag.CHARGE_ID and DecideFlag.DUPLICATE: a charge's id forwarded to its owner, which counts it at most once; a link below it answers a charge with an id 503, not counted */
  CHARGE_ID: 13,
  /** CALL method 21: a hand-off batch with the fine lapses of its concurrency states (shard/records/fine-records.ts); a link below it gets MERGE_STATES, slots held to their buckets' ends */
  FINE_LAPSES: 15,
  /** CALL method 22: a replication batch with the fine lapses of its concurrency states (movement/replicator.ts); a link below it gets REPLICATE, a promoted replica holds those slots to their buckets' ends */
  FINE_REPLICAS: 16,
});
export type ProtocolFeature = keyof typeof FEATURE_VERSIONS;
/**
 * CALL method the link itself answers (never the node's handler): payload and reply are u8 min,
 * u8 max, the protocol versions the sender speaks. The dialer sends it first, before anything
 * else on the connection.
 */
export const PROTOCOL_CALL = 0;
/** The range a server tells by answering PROTOCOL_CALL with an error: a node of 11, built before ranges. */
export const LEGACY_RANGE = Object.freeze({ min: 11, max: 11 });
/** Most bytes of a ZONE (UTF-8) in READY; config.ts holds ZONE to the same. */
export const MAX_ZONE_BYTES = 255;
/** Nonce and proof (HMAC-SHA256) sizes in the handshake. */
export const NONCE_BYTES = 32;
export const MAC_BYTES = 32;
/** Node ids travel as u16 length + UTF-8; more than this is refused. */
export const MAX_NODE_ID_BYTES = 1024;

/** Start of the handshake transcript that every proof and session key is derived from (docs/peer-protocol.md). */
export const TRANSCRIPT_LABEL = "ringlimit peer protocol 3";

/**
 * A DECIDE item's `u8 algorithm` is the algorithm's code, carried and not judged here: the
 * receiving handler resolves it (src/algorithms/registry.ts) and answers an unknown one
 * with an error for that item, like any other value outside the request contract.
 */
export const MAX_ALGORITHM_CODE = 0xff;

/** `u8 code` of a DECIDE_REPLY item. */
export const DecideCode = { ALLOWED: 0, BLOCKED: 1, ERROR: 2 } as const;

/**
 * Fixed part of one DECIDE item: reqId u32, algorithm u8, limit u32, duration u32, nsLen u16,
 * idLen u16, cost u32 (what the request weighs; 0 is a peek: docs/api.md), flags u8
 * (DecideItemFlag).
 */
export const DECIDE_ITEM_FIXED_BYTES = 22;
/**
 * Bits of a DECIDE item's flag byte. OVERRIDABLE: the owner's overrides and shadow mode apply to
 * it (a POST /limit key, not an RLS descriptor's). OPENING: the sender's share of this key's
 * window opened empty (a window that began before its connection to the owner): the owner may
 * answer with a grant (DecideFlag.GRANTED). CHARGE: counted whatever remains (Algorithm.charge);
 * its BLOCKED reply (past the limit) carries the debt, capped at a u32, in `remaining`.
 * REFUND: with CHARGE, `cost` is given back (a negative charge); cost is u32 either way.
 * CHARGE_ID (protocol 13): with CHARGE, the item ends with its charge id: u8 length (1 to
 * MAX_CHARGE_ID_BYTES) and that many bytes of visible ASCII, after the identifier.
 */
export const DecideItemFlag = { OVERRIDABLE: 1, OPENING: 2, CHARGE: 4, REFUND: 8, CHARGE_ID: 16 } as const;
/** Every DecideItemFlag bit a DECIDE item may carry. */
export const DECIDE_ITEM_FLAGS = DecideItemFlag.OVERRIDABLE | DecideItemFlag.OPENING | DecideItemFlag.CHARGE | DecideItemFlag.REFUND | DecideItemFlag.CHARGE_ID;
/** Most bytes of a charge id on the wire (REQUEST_BOUNDS.chargeId: one byte per character). */
export const MAX_CHARGE_ID_BYTES = 64;
/**
 * One DECIDE_REPLY item: reqId u32, code u8, remaining u32, resetTime u32, retryAfterMs f64,
 * flags u8 (DecideFlag), then only with APPLIED: limit u32, duration u32, algorithm u8, then
 * only with GRANTED: granted u32, the grant's window start u32 (unix seconds, owner's clock).
 */
export const DECIDE_REPLY_ITEM_BYTES = 22;
/** What an APPLIED reply item carries after its fixed part. */
export const DECIDE_REPLY_APPLIED_BYTES = 9;
/** What a GRANTED reply item carries after that. */
export const DECIDE_REPLY_GRANTED_BYTES = 8;
/**
 * Bits of a DECIDE_REPLY item's flag byte. APPLIED: the owner decided with a limit other than
 * the one asked (an operator's override), which follows. SHADOW: the answer is ALLOWED only
 * because the owner's policy runs this key in shadow mode (it would have been BLOCKED).
 * GRANTED: beside this decision the owner counted a grant of the key's window for the sender
 * (an answer to DecideItemFlag.OPENING), which follows. DUPLICATE (protocol 13, only in answer to
 * an item with CHARGE_ID): the owner answered from its memory of an earlier charge with that id,
 * and counted nothing now.
 */
export const DecideFlag = { APPLIED: 1, SHADOW: 2, GRANTED: 4, DUPLICATE: 8 } as const;
/** u32 item count at the start of DECIDE and DECIDE_REPLY bodies. */
export const BATCH_COUNT_BYTES = 4;
/**
 * u32 after a DECIDE's item count: the budget, in µs, that the owner has from the frame's
 * receipt to decide its items so that the answers can still reach the sender before it gives
 * up on them (docs/peer-protocol.md). The owner drops a frame whose budget ran out, unanswered
 * and uncounted: its sender answers those requests fail-open (`degraded`).
 */
export const DECIDE_BUDGET_BYTES = 4;
/** Budget of a frame whose sender waits without a deadline: never dropped. */
export const NO_BUDGET = 0xffffffff;
/** ns and identifier lengths are u16 on the wire. */
export const MAX_STRING_BYTES = 0xffff;

/** CALL body prefix: callId u32, method u16. CALL_REPLY prefix: callId u32, status u8. */
export const CALL_HEADER_BYTES = 6;
export const CALL_REPLY_HEADER_BYTES = 5;
export const CallStatus = { OK: 0, ERROR: 1 } as const;
/** Error messages in CALL_REPLY are cut to this many bytes. */
export const MAX_CALL_ERROR_BYTES = 1024;

/**
 * Hard limit on the time a server gives a new connection to complete the
 * handshake (TLS included). The client uses the same limit for its side. A
 * member completes it in one round trip; kept short so unauthenticated
 * connections cannot sit on slots.
 */
export const HANDSHAKE_TIMEOUT_MS = 2_000;

/**
 * How long an authenticated connection may stay silent before the server closes it, for
 * clients that PING every `heartbeatIntervalMs` (HEARTBEAT_INTERVAL_MS, 10 ms to 60 s): five
 * missed heartbeats, and never under 5 s. A live client is never closed however slow its
 * heartbeat is set, and a dead one frees its slot after a few beats.
 */
export function idleTimeoutFor(heartbeatIntervalMs: number): number {
  return Math.max(5_000, 5 * heartbeatIntervalMs);
}

/**
 * Defaults of the PeerServer and PeerClient options that are not settings of the service.
 * The settings (PEER_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, FAILURE_TIMEOUT_MS) have their
 * defaults in src/config.ts only: those options are required.
 */
export const PEER_DEFAULTS = Object.freeze({
  handshakeTimeoutMs: HANDSHAKE_TIMEOUT_MS, // ms, server and client
  maxPendingHandshakes: 256, // count, server: unauthenticated connections held at once; beyond it the oldest is closed
  maxPendingPerSource: 16, // count, server: the same from one source address
  reconnectMinMs: 50, // ms, client: first reconnect delay
  reconnectMaxMs: 2_000, // ms, client: cap of the exponential backoff
  callTimeoutMs: 5_000, // ms, client: default deadline of call() (cold path)
});
