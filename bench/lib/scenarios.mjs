// The rows of the benchmark. Each names its server, its request bodies and whether
// it is part of --quick. Bodies: identifier = idPrefix + (counter % idSpace), see bodies.mjs.
//
// server kinds: floor | ringlimit | fastify | gubernator
// all200: every answer must be an undegraded 200 (the run checks it and says so).
// oneNode: the row of the same keys on one node; the table prints this row's CPU per
// decision over that one's (a cluster over its own one node).
// steady: the measured load sends the identifiers the warm-up sent (each run's own set), so
// every member has met every key; without it each run measures identifiers never sent before.
export const ALGORITHMS = ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket']

// Many identifiers, a limit nobody reaches: every answer is a 200 on an existing key.
const ALLOWED = { namespace: 'bench', limit: 1000000, duration: 60, idSpace: 10000 }
// A limit only an owner decides, in windows of a second, on as many identifiers.
const SMALL = { namespace: 'bench', limit: 100, duration: 1, idSpace: 10000 }

export const SCENARIOS = [
  {
    name: 'floor',
    desc: 'uWS server: read body, JSON.parse, constant 200 (the baseline of every ratio)',
    server: { kind: 'floor' },
    body: ALLOWED,
    quick: true,
  },
  {
    name: 'floor-https',
    desc: 'the floor over HTTPS (the fair baseline for ringlimit-https)',
    server: { kind: 'floor', tls: true },
    body: ALLOWED,
  },
  {
    name: 'ringlimit-allowed',
    desc: 'one node, 10 k identifiers, limit never reached: all 200 (the local path)',
    server: { kind: 'ringlimit' },
    all200: true,
    body: ALLOWED,
    quick: true,
  },
  // Issue 40: the same node with its HTTP door in worker threads around one state owner. The
  // server CPU per decision of workers2 over workers1 (same run) is the hop's price (target <= 1.15x).
  {
    name: 'ringlimit-workers1',
    desc: 'one node, WORKERS=1 (one thread): the allowed path, the baseline of ringlimit-workers2',
    server: { kind: 'ringlimit', env: { WORKERS: '1' } },
    body: ALLOWED,
  },
  {
    name: 'ringlimit-workers2',
    desc: 'one node, WORKERS=2: two HTTP worker threads, decisions over the SharedArrayBuffer rings to the state owner',
    server: { kind: 'ringlimit', env: { WORKERS: '2' } },
    body: ALLOWED,
  },
  {
    name: 'ringlimit-blocked',
    desc: 'one node, 10 identifiers with limit 1 per hour: all but the first 429',
    server: { kind: 'ringlimit' },
    body: { namespace: 'bench', limit: 1, duration: 3600, idSpace: 10 },
    quick: true,
  },
  ...ALGORITHMS.map((algorithm) => ({
    name: `ringlimit-${algorithm}`,
    desc: `one node, allowed path, algorithm ${algorithm} sent explicitly`,
    server: { kind: 'ringlimit' },
    body: { ...ALLOWED, algorithm },
  })),
  {
    name: 'ringlimit-charge',
    desc: 'one node, POST /limit/charge of 1 on the allowed path (issue 29: priced against ringlimit-allowed)',
    server: { kind: 'ringlimit' },
    body: { ...ALLOWED, cost: 1, path: '/limit/charge' },
    quick: true,
  },
  {
    name: 'ringlimit-charge-debt',
    desc: 'one node, POST /limit/charge of 1,000 on keys of limit 1,000 per hour: every answer in debt',
    server: { kind: 'ringlimit' },
    body: { namespace: 'bench', limit: 1000, duration: 3600, idSpace: 10, cost: 1000, path: '/limit/charge' },
  },
  // A charge with a charge_id priced against one without, on the same key with bodies of the same
  // size: each id is new (the owner remembers it, CHARGE_ID_MEMORY_MS 1 s so the memory turns over
  // within a run instead of filling), the other row varies a field the service ignores.
  ...[
    ['ringlimit-charge-noid', 'ref', 'without an id (a field the service ignores varies: same bytes)'],
    ['ringlimit-charge-id', 'charge_id', 'each with a new charge_id, remembered by the owner (issue 29 item 6: priced against ringlimit-charge-noid)'],
  ].map(([name, varyField, what]) => ({
    name,
    desc: `one node, POST /limit/charge of 1 on one key (limit 2^32 - 1 per hour), ${what}`,
    server: { kind: 'ringlimit', env: { CHARGE_ID_MEMORY_MS: '1000', MAX_MEMORY_MB: '1024' } },
    body: { namespace: 'bench', identifier: 'charged', limit: 4294967295, duration: 3600, cost: 1, path: '/limit/charge', varyField, idSpace: 1e15 },
  })),
  {
    name: 'ringlimit-hot-key',
    desc: 'one node, a single identifier, limit 1 M per second: all 200 on one key',
    server: { kind: 'ringlimit' },
    body: { namespace: 'bench', limit: 1000000, duration: 1, idSpace: 1 },
  },
  {
    name: 'ringlimit-1m-keys',
    desc: 'one node, 1 M identifier space, counter-based: (nearly) every request creates a key',
    server: { kind: 'ringlimit' },
    body: { namespace: 'bench', limit: 10, duration: 60, idSpace: 1000000 },
    quick: true,
  },
  {
    name: 'ringlimit-https',
    desc: 'one node over HTTPS (self-signed certificate), allowed path',
    server: { kind: 'ringlimit', tls: true },
    body: ALLOWED,
    quick: true,
  },
  {
    name: 'ringlimit-cluster3',
    desc: '3 nodes, load spread evenly over all of them: ~2/3 of decisions forwarded to the owner',
    server: { kind: 'ringlimit', nodes: 3 },
    body: ALLOWED,
    quick: true,
  },
  {
    name: 'ringlimit-service3',
    desc: '3 nodes behind a round-robin Service, defaults (REPLICAS=2): connections spread over the nodes, 30,000 identifiers the warm-up sent too (steady: shares answer); ×1-node is what a team pays for a Service over one node (issue 39: <= 1.3x)',
    server: { kind: 'ringlimit', nodes: 3, env: { REPLICAS: '2' } },
    all200: true,
    steady: true,
    body: { ...ALLOWED, idSpace: 30000 },
    oneNode: 'ringlimit-allowed',
    quick: true,
  },
  {
    name: 'ringlimit-service3-cold',
    desc: 'ringlimit-service3 on identifiers never sent before: each first request of a key on a non-owner is forwarded and brings its opening grant back',
    server: { kind: 'ringlimit', nodes: 3, env: { REPLICAS: '2' } },
    all200: true,
    body: { ...ALLOWED, idSpace: 30000 },
    oneNode: 'ringlimit-allowed',
  },
  // Limit 100 per second: an owner must decide every request (shares answer large limits only),
  // and these rows reach a few requests per identifier per second on this machine (10 at 100,000/s):
  // nobody is ever blocked, so the 429 column must read 0.
  {
    name: 'ringlimit-allowed-100',
    desc: 'one node, 10,000 identifiers, limit 100 per 1 s, never reached: the one-node reference of ringlimit-service3-100',
    server: { kind: 'ringlimit' },
    all200: true,
    body: SMALL,
  },
  {
    name: 'ringlimit-service3-100',
    desc: '3 nodes round-robin, defaults (REPLICAS=2), 10,000 identifiers, limit 100 per 1 s: every decision by its owner, ~2/3 forwarded (issue 39: <= 1.6x its one node)',
    server: { kind: 'ringlimit', nodes: 3, env: { REPLICAS: '2' } },
    all200: true,
    body: SMALL,
    oneNode: 'ringlimit-allowed-100',
  },
  // gubernator v2 (--gubernator PATH): the same keys, limits and windows through its JSON door.
  {
    name: 'gubernator-1node',
    desc: 'gubernator v2, one daemon, defaults, POST /v1/GetRateLimits: the keys and limit of ringlimit-allowed',
    server: { kind: 'gubernator', nodes: 1 },
    all200: true,
    body: { ...ALLOWED, format: 'gubernator', path: '/v1/GetRateLimits' },
  },
  {
    name: 'gubernator-service3',
    desc: 'gubernator v2, 3 daemons (member-list), connections spread evenly over their HTTP ports: the keys and limit of ringlimit-service3',
    server: { kind: 'gubernator', nodes: 3 },
    all200: true,
    steady: true,
    body: { ...ALLOWED, idSpace: 30000, format: 'gubernator', path: '/v1/GetRateLimits' },
    oneNode: 'gubernator-1node',
  },
  {
    name: 'gubernator-1node-100',
    desc: 'gubernator v2, one daemon: the keys and limit of ringlimit-allowed-100',
    server: { kind: 'gubernator', nodes: 1 },
    all200: true,
    body: { ...SMALL, format: 'gubernator', path: '/v1/GetRateLimits' },
  },
  {
    name: 'gubernator-service3-100',
    desc: 'gubernator v2, 3 daemons round-robin: the keys and limit of ringlimit-service3-100',
    server: { kind: 'gubernator', nodes: 3 },
    all200: true,
    body: { ...SMALL, format: 'gubernator', path: '/v1/GetRateLimits' },
    oneNode: 'gubernator-1node-100',
  },
  {
    name: 'ringlimit-policy-miss',
    desc: 'one node, allowed path, POLICY_PATH with 10,000 overrides of which none matches (issue 20: <= 1.05x ringlimit-allowed)',
    server: { kind: 'ringlimit', policy: true },
    body: ALLOWED,
  },
  {
    name: 'ringlimit-policy-hit',
    desc: 'one node, allowed path, POLICY_PATH with 10,000 overrides, every request matching one (issue 20: <= 1.1x ringlimit-allowed)',
    server: { kind: 'ringlimit', policy: true },
    body: { ...ALLOWED, namespace: 'vip' },
  },
  {
    name: 'fastify-memory',
    desc: 'Fastify 5 + rate-limiter-flexible RateLimiterMemory, same contract, allowed path',
    server: { kind: 'fastify', store: 'memory' },
    body: ALLOWED,
    quick: true,
  },
  {
    name: 'fastify-redis',
    desc: 'Fastify 5 + rate-limiter-flexible RateLimiterRedis + redis-server (CPU of both counted)',
    server: { kind: 'fastify', store: 'redis' },
    body: ALLOWED,
    quick: true,
  },
]

export const BASELINE = 'floor'
export const LOCAL = 'ringlimit-allowed'
