// Offline guessing of CLUSTER_SECRET from one captured CHALLENGE (issue 22, item 7).
// Run after `npm run build`: node bench/secret-guess.mjs
import { createSecretKey, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const args = benchOptions(import.meta.url, {
  about: `The offline guessing attack on the peer handshake, in-process on the node's own modules.
A client that knows no secret sends a HELLO and keeps the server's CHALLENGE (nonce and
proof): that transcript is all an attacker needs to test guesses. The bench guesses from a
list with the real secret at position --position, two ways: the handshake of protocol 6
(HKDF-SHA256 straight over the secret's bytes) and this build's (scrypt first: clusterKey),
and prints the cost per guess and the time to reach the secret.`,
  options: {
    secret: {
      type: 'string',
      default: 'ringlimit-production-cluster-secret-do-not-share-2026',
      help: 'the passphrase to find (it passes the CLUSTER_SECRET rule)',
    },
    position: { type: 'number', default: 2183, min: 1, help: 'where the secret sits in the guess list (2,183: where a dictionary attack found it)' },
    'scrypt-guesses': {
      type: 'number',
      default: 8,
      min: 2,
      help: "guesses tried with this build's derivation (each costs one scrypt); the time to the secret is extrapolated from them",
    },
  },
}).values
const conditions = new RunConditions()
const { ServerHandshake, deriveSecrets, secretKey } = await import('../dist/src/peer/link/handshake.js')
const { clusterKey, clusterSecretWeakness, CLUSTER_KEY_SCRYPT } = await import('../dist/src/peer/link/cluster-secret.js')
const { decodeChallenge, encodeHello } = await import('../dist/src/peer/wire/messages.js')
const { FRAME_HEADER_BYTES } = await import('../dist/src/peer/wire/constants.js')

const weakness = clusterSecretWeakness(args.secret)
console.log(`secret: ${args.secret.length} characters; the CLUSTER_SECRET rule says: ${weakness ?? 'acceptable'}`)

/** One unauthenticated HELLO to a server holding `key`: the CHALLENGE it answers (what a network attacker records). */
function capture(key) {
  const server = new ServerHandshake(key, 'server-1')
  const nonceC = randomBytes(32)
  const hello = encodeHello(nonceC, 'attacker', 'server-1')
  let frame
  server.receive(1, hello.subarray(FRAME_HEADER_BYTES), (f) => (frame = f))
  const challenge = decodeChallenge(frame.subarray(FRAME_HEADER_BYTES))
  return { clientId: 'attacker', serverId: 'server-1', nonceC, nonceS: challenge.nonce, proof: challenge.proof }
}

const guesses = (n) => Array.from({ length: n }, (_, i) => (i === n - 1 ? args.secret : `ringlimit-production-cluster-secret-guess-${i}-2026`))

/** Try guesses against a transcript; `rootOf` turns a guess into the handshake's HKDF key. Returns the secret's index and ms per guess. */
function attack(transcript, list, rootOf) {
  const started = performance.now()
  let found = -1
  for (let i = 0; i < list.length && found < 0; i++) {
    const s = deriveSecrets(rootOf(list[i]), transcript.clientId, transcript.serverId, transcript.nonceC, transcript.nonceS)
    if (timingSafeEqual(s.serverProof, transcript.proof)) found = i
  }
  return { found, msPerGuess: (performance.now() - started) / list.length }
}

// Before: protocol 6 keyed HKDF with the secret's bytes. Its transcript is made here with
// that derivation (this build's server no longer answers with it).
const rawKey = (s) => createSecretKey(Buffer.from(s, 'utf8'))
const before = attack(capture(rawKey(args.secret)), guesses(args.position), rawKey)
console.log(
  `before (protocol 6, HKDF of the secret): found at guess ${before.found + 1} of ${args.position}, ${(before.msPerGuess * 1000).toFixed(1)} µs per guess, ${((before.msPerGuess * args.position) / 1000).toFixed(2)} s to the secret`,
)

// After: this build's server, keyed by secretKey (scrypt once, cached for the process).
const startup = performance.now()
const serverKey = secretKey(args.secret)
console.log(
  `start-up: the node derives its cluster key once: ${(performance.now() - startup).toFixed(0)} ms (scrypt N=${CLUSTER_KEY_SCRYPT.N}, r=${CLUSTER_KEY_SCRYPT.r}, p=${CLUSTER_KEY_SCRYPT.p}, ${(128 * CLUSTER_KEY_SCRYPT.N * CLUSTER_KEY_SCRYPT.r) / 2 ** 20} MiB)`,
)
const transcript = capture(serverKey)
const rawMiss = attack(transcript, [args.secret], rawKey)
console.log(
  `the protocol 6 guess of the right secret against this build's transcript: ${rawMiss.found === 0 ? 'MATCHES (the oracle is still cheap)' : 'no match: a guess needs scrypt'}`,
)
// Guesses bypass the process cache: each is a fresh scrypt, as for an attacker.
const { scryptSync } = await import('node:crypto')
const stretched = (s) => createSecretKey(scryptSync(Buffer.from(s, 'utf8'), 'ringlimit cluster key v1', 32, CLUSTER_KEY_SCRYPT))
const after = attack(transcript, guesses(args['scrypt-guesses']), stretched)
if (after.found !== args['scrypt-guesses'] - 1) throw new Error("the right guess did not match this build's transcript: the bench and the handshake disagree")
if (!clusterKey(args.secret).equals(scryptSync(Buffer.from(args.secret, 'utf8'), 'ringlimit cluster key v1', 32, CLUSTER_KEY_SCRYPT)))
  throw new Error("clusterKey differs from the bench's scrypt")
console.log(
  `after (scrypt, then HKDF): ${after.msPerGuess.toFixed(1)} ms per guess (${args['scrypt-guesses']} guesses, the secret found at the last), ${((after.msPerGuess * args.position) / 1000).toFixed(0)} s to reach guess ${args.position} on one core`,
)
console.log(`cost per guess: ×${Math.round(after.msPerGuess / before.msPerGuess).toLocaleString('en')}`)
conditions.print()
