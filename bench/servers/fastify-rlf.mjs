// What a Node team would build instead of ringlimit: Fastify 5 + rate-limiter-flexible,
// serving the same contract for the allowed (200) and blocked (429) paths.
//
// - Authorization: Bearer <key> (scheme case-insensitive), else 401.
// - Body validated by a JSON schema (Fastify's Ajv): namespace, identifier, limit,
//   duration, algorithm, product — the spec's bounds. Failures answer 400.
// - State keyed by effective namespace + identifier + limit + duration: one limiter
//   per (limit, duration) pair, whose keyPrefix carries limit and duration.
// - Semantics: rate-limiter-flexible's own fixed window, which starts at a key's first
//   request rather than at an epoch-aligned boundary, and counts blocked requests too.
//   The `algorithm` field is validated and echoed but every algorithm is served as
//   this fixed window. That is good enough for a cost comparison; it is not ringlimit.
// - Response schemas are declared, so Fastify serialises with fast-json-stringify
//   (the idiomatic and faster way: we compare against a competitor at its best).
//
// Env: PORT, HOST (127.0.0.1), API_KEY (required), STORE=memory|redis, REDIS_PORT.
import Fastify from 'fastify'
import { randomUUID } from 'node:crypto'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'

const PORT = Number(process.env.PORT)
const HOST = process.env.HOST || '127.0.0.1'
const API_KEY = process.env.API_KEY
const STORE = process.env.STORE || 'memory'
const API_VERSION = 'v2026.8.23'
if (!API_KEY) {
  console.error('fastify-rlf: API_KEY is required')
  process.exit(1)
}

let redis = null
if (STORE === 'redis') {
  const { Redis } = await import('ioredis')
  redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT), enableAutoPipelining: true })
  await new Promise((resolve, reject) => {
    redis.once('ready', resolve)
    redis.once('error', reject)
  })
} else if (STORE !== 'memory') {
  console.error(`fastify-rlf: STORE must be memory or redis, got ${STORE}`)
  process.exit(1)
}

const limiters = new Map()
function limiterFor(limit, duration) {
  const name = `${limit}:${duration}`
  let l = limiters.get(name)
  if (l === undefined) {
    const opts = { points: limit, duration, keyPrefix: `rl:${name}` }
    l = redis ? new RateLimiterRedis({ ...opts, storeClient: redis }) : new RateLimiterMemory(opts)
    limiters.set(name, l)
  }
  return l
}

function slug(s) {
  return s
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
}

const processing = { type: 'object', properties: { success: { type: 'boolean' }, processing_time_ms: { type: 'number' } } }
const envelope = (data) => ({
  type: 'object',
  properties: {
    id: { type: 'string' },
    timestamp: { type: 'number' },
    api_version: { type: 'string' },
    object: { type: 'string' },
    data,
  },
})
const bodySchema = {
  type: 'object',
  required: ['namespace', 'identifier', 'limit', 'duration'],
  properties: {
    namespace: { type: 'string', minLength: 1, maxLength: 256 },
    product: { type: 'string', minLength: 1, maxLength: 128 },
    identifier: { type: 'string', minLength: 1, maxLength: 512 },
    limit: { type: 'integer', minimum: 1, maximum: 1000000 },
    duration: { type: 'integer', minimum: 1, maximum: 31536000 },
    algorithm: { type: 'string', enum: ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket'] },
  },
}
const schema = {
  body: bodySchema,
  response: {
    200: envelope({
      type: 'object',
      properties: {
        allowed: { type: 'boolean' },
        namespace: { type: 'string' },
        identifier: { type: 'string' },
        limit: { type: 'number' },
        remaining: { type: 'number' },
        reset_time: { type: 'number' },
        count: { type: 'number' },
        algorithm: { type: 'string' },
        degraded: { type: 'boolean' },
        _request: processing,
      },
    }),
    429: envelope({
      type: 'object',
      properties: {
        error: { type: 'string' },
        status: { type: 'number' },
        namespace: { type: 'string' },
        identifier: { type: 'string' },
        limit: { type: 'number' },
        remaining: { type: 'number' },
        reset_time: { type: 'number' },
        retry_after: { type: 'number' },
        _request: processing,
      },
    }),
  },
}

const app = Fastify({
  logger: false,
  // ajv coerces types by default in Fastify; the contract says "10" is a 400.
  ajv: { customOptions: { coerceTypes: false } },
  bodyLimit: 16 * 1024,
})

function errorEnvelope(status, error) {
  return { id: 'err_' + randomUUID(), timestamp: Date.now(), api_version: API_VERSION, object: 'error', data: { error, status } }
}

app.setErrorHandler((err, req, reply) => {
  const status = err.validation ? 400 : (err.statusCode ?? 500)
  const text = { 400: 'Bad Request', 413: 'Payload Too Large', 415: 'Unsupported Media Type' }[status] ?? 'Internal server error'
  reply.code(status).send(errorEnvelope(status, text))
})

const bearer = 'Bearer ' + API_KEY
app.addHook('onRequest', async (req, reply) => {
  if (req.url !== '/limit') return
  const h = req.headers.authorization
  if (typeof h !== 'string' || h.length !== bearer.length || h.slice(0, 7).toLowerCase() !== 'bearer ' || h.slice(7) !== API_KEY) {
    reply.code(401).send(errorEnvelope(401, 'Unauthorized'))
    return reply
  }
})

app.get('/ready', async () => 'ok')

/** The 200 envelope, for a counted request and a fail-open one alike (fields serialised in schema order). */
function sendAllowed(reply, headers, now, t0, data) {
  data.allowed = true
  data._request = { success: true, processing_time_ms: performance.now() - t0 }
  return reply
    .code(200)
    .headers(headers)
    .send({
      id: 'req_' + randomUUID(),
      timestamp: now,
      api_version: API_VERSION,
      object: 'rate_limit',
      data,
    })
}

app.post('/limit', { schema }, async (req, reply) => {
  const t0 = performance.now()
  const { namespace, product, identifier, limit, duration } = req.body
  const algorithm = req.body.algorithm ?? 'fixed-window'
  let ns = namespace
  if (product !== undefined) {
    const s = slug(product)
    if (s === '') return reply.code(400).send(errorEnvelope(400, 'Bad Request'))
    ns = namespace + '.' + s
  }
  const now = Date.now()
  const headers = { 'RateLimit-Policy': `"${algorithm}";q=${limit};w=${duration}` }
  try {
    const r = await limiterFor(limit, duration).consume(ns + ':' + identifier)
    headers.RateLimit = `"${algorithm}";r=${r.remainingPoints};t=${Math.ceil(r.msBeforeNext / 1000)}`
    return sendAllowed(reply, headers, now, t0, {
      namespace: ns,
      identifier,
      limit,
      algorithm,
      remaining: r.remainingPoints,
      reset_time: Math.ceil((now + r.msBeforeNext) / 1000),
      count: r.consumedPoints,
    })
  } catch (r) {
    // Store failure (Redis down): fail open like ringlimit does.
    if (!(r instanceof RateLimiterRes))
      return sendAllowed(reply, headers, now, t0, {
        namespace: ns,
        identifier,
        limit,
        algorithm,
        remaining: limit - 1,
        reset_time: Math.ceil(now / 1000) + duration,
        count: 1,
        degraded: true,
      })
    const retryAfter = Math.ceil(r.msBeforeNext) / 1000
    headers.RateLimit = `"${algorithm}";r=0;t=${Math.ceil(r.msBeforeNext / 1000)}`
    headers['Retry-After'] = String(Math.max(1, Math.ceil(retryAfter)))
    return reply
      .code(429)
      .headers(headers)
      .send({
        id: 'err_' + randomUUID(),
        timestamp: now,
        api_version: API_VERSION,
        object: 'error',
        data: {
          error: 'Rate limit exceeded',
          status: 429,
          namespace: ns,
          identifier,
          limit,
          remaining: 0,
          reset_time: Math.ceil((now + r.msBeforeNext) / 1000),
          retry_after: retryAfter,
          _request: { success: false, processing_time_ms: performance.now() - t0 },
        },
      })
  }
})

await app.listen({ host: HOST, port: PORT })
