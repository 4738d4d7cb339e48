// Issue 22, item 7: one CHALLENGE, which anyone may ask for with a HELLO, lets its recipient
// test guesses of the secret offline. Each guess now costs a scrypt (the cluster key), not an HKDF.
import { createSecretKey, randomBytes, scryptSync, timingSafeEqual, type KeyObject } from "node:crypto";
import t from "tap";
import { CLUSTER_KEY_SCRYPT, clusterKey, clusterSecretWeakness } from "../../../src/peer/link/cluster-secret.js";
import { ServerHandshake, deriveSecrets, secretKey } from "../../../src/peer/link/handshake.js";
import { FRAME_HEADER_BYTES, FrameType } from "../../../src/peer/wire/constants.js";
import { decodeChallenge, encodeHello } from "../../../src/peer/wire/messages.js";

// Passes the strength rule, and fell in 2,183 guesses (0.2 s) to the protocol 6 handshake.
const SECRET = "ringlimit-production-cluster-secret-do-not-share-2026";

interface Transcript {
  nonceC: Buffer;
  nonceS: Buffer;
  proof: Buffer;
}

/** What an attacker without the secret records: its own HELLO, the server's CHALLENGE. */
function capture(): Transcript {
  const server = new ServerHandshake(secretKey(SECRET), "server-1");
  const nonceC = randomBytes(32);
  let frame: Buffer | undefined;
  server.receive(FrameType.HELLO, encodeHello(nonceC, "attacker", "server-1").subarray(FRAME_HEADER_BYTES), (f) => (frame = f));
  const challenge = decodeChallenge(frame!.subarray(FRAME_HEADER_BYTES));
  return { nonceC, nonceS: challenge.nonce, proof: challenge.proof };
}

/** The attacker's test of one guess, given how a guess becomes the handshake's key. */
function matches(tr: Transcript, key: KeyObject): boolean {
  return timingSafeEqual(deriveSecrets(key, "attacker", "server-1", tr.nonceC, tr.nonceS).serverProof, tr.proof);
}

const raw = (guess: string) => createSecretKey(Buffer.from(guess, "utf8"));
const stretched = (guess: string) => createSecretKey(scryptSync(Buffer.from(guess, "utf8"), "ringlimit cluster key v1", 32, CLUSTER_KEY_SCRYPT));

t.test("the secret passes the strength rule, which stays", async (t) => {
  t.equal(clusterSecretWeakness(SECRET), undefined);
});

t.test("a captured CHALLENGE: the old cheap guess no longer tests anything; a guess costs a scrypt", async (t) => {
  const tr = capture();
  t.notOk(matches(tr, raw(SECRET)), "HKDF straight over the right secret does not match: that oracle is gone");
  const guesses = ["ringlimit-production-cluster-secret-do-not-share-2025", "ringlimit-staging-cluster-secret-do-not-share-2026", SECRET];
  const started = performance.now();
  const found = guesses.findIndex((g) => matches(tr, stretched(g)));
  const scryptMs = (performance.now() - started) / guesses.length;
  t.equal(found, 2, "the right guess, stretched, matches; the wrong ones do not");

  const hkdfGuesses = 200;
  const hkdfStarted = performance.now();
  for (let i = 0; i < hkdfGuesses; i++) matches(tr, raw(`guess-${i}`));
  const hkdfMs = (performance.now() - hkdfStarted) / hkdfGuesses;
  t.comment(`per guess: ${scryptMs.toFixed(1)} ms now, ${(hkdfMs * 1000).toFixed(1)} µs for HKDF alone (×${Math.round(scryptMs / hkdfMs)})`);
  t.ok(scryptMs > 100 * hkdfMs, `a guess costs over 100 times what it did (×${Math.round(scryptMs / hkdfMs)})`);
});

t.test("the cluster key is derived once per secret in a process: the suite's many peers share it", async (t) => {
  const first = clusterKey(SECRET);
  const started = performance.now();
  for (let i = 0; i < 100; i++) secretKey(SECRET);
  t.equal(clusterKey(SECRET), first, "the same key, from the cache");
  t.ok(performance.now() - started < 500, `100 more peer keys in ${(performance.now() - started).toFixed(1)} ms`);
});
