import t from "tap";
import { closeAgents, request, type Reply } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../../harness/node-process.js";
import { eventually, sleep } from "../../harness/wait.js";
import { ALGORITHM_NAMES } from "../../../src/algorithms/index.js";

t.teardown(closeAgents);

const ALGORITHMS = ALGORITHM_NAMES;
const YEAR = 31536000; // no window boundary or refill worth a request during the test

t.test("graceful leave and rejoin keep every counted request", async (t) => {
  const cluster = await startCluster(3, { LOG_LEVEL: "info" });
  t.teardown(() => cluster.stop());
  const [a, b] = cluster.nodes as NodeProcess[];
  // Keys owned by node 2 (they must move) and by the others (they must not be disturbed).
  const keys = ALGORITHMS.flatMap((algorithm) =>
    [2, 2, 0, 1].map((owner, k) => ({ algorithm, id: cluster.identifierOwnedBy(owner, `${algorithm}-${k}`), used: 3 + k })),
  );
  for (const key of keys) {
    for (let i = 0; i < key.used; i++) {
      const r = await hit(cluster.nodes[i % 3]!, key.id, 100, { algorithm: key.algorithm, duration: YEAR });
      if (r.status !== 200) t.fail(`setup request ${r.status}`);
    }
  }

  const leaver = cluster.nodes[2]!;
  leaver.signal("SIGTERM");
  const exit = await leaver.exited;
  t.same(exit, { code: 0, signal: null }, "SIGTERM: exit code 0");
  const moving = 2 * ALGORITHMS.length; // two keys of each algorithm owned by the leaver
  t.match(leaver.output(), new RegExp(`"handedOver":${moving},"notHandedOver":0`), `the leaver handed over its ${moving} keys, none left behind`);
  await waitForRing([a!, b!], 2);

  const check = async (node: NodeProcess, extra: number, label: string) => {
    for (const key of keys) {
      const r: Reply = await hit(node, key.id, 100, { algorithm: key.algorithm, duration: YEAR });
      t.equal(r.status, 200, `${label}: ${key.algorithm} ${key.id}`);
      t.notOk(r.json.data.degraded, `${label}: not degraded`);
      t.equal(r.json.data.count, key.used + extra, `${label}: ${key.algorithm} ${key.id} keeps its ${key.used + extra - 1} earlier requests`);
    }
  };
  await check(a!, 1, "after SIGTERM of the owner");
  t.ok(
    ((await metric(a!, "ringlimit_stored_keys")) ?? 0) + ((await metric(b!, "ringlimit_stored_keys")) ?? 0) >= keys.length,
    "the states now live on the survivors",
  );

  const back = await cluster.restart(2);
  await waitForRing([a!, b!, back], 3);
  // Join hand-off runs when each survivor sees the new member; give it a moment to finish
  // (under a second here; the wait ends as soon as the keys are there, and 5 s was seen to
  // run out on a loaded machine: this bounds a wait, it is not a speed claim).
  await eventually(async () => ((await metric(back, "ringlimit_stored_keys")) ?? 0) >= moving, 20_000);
  t.equal(await metric(back, "ringlimit_stored_keys"), moving, `the rejoined node received the states of its ${moving} keys`);
  await check(b!, 2, "after the owner came back");
});

t.test("rolling restart of all three nodes under load: no failed request, over-admission measured", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const LIMIT = 40;
  const ids = Array.from({ length: 48 }, (_, i) => ({ id: `roll-${i}`, algorithm: ALGORITHMS[i % ALGORITHMS.length]! }));
  const allowed = new Map<string, number>();
  const failures: string[] = [];
  let sent = 0;
  let degraded = 0;
  let restarting = -1;
  let running = true;
  /** requests sent to each node and not answered yet */
  const inFlight = [0, 0, 0];

  const load = (async () => {
    let n = 0;
    while (running) {
      const targets = cluster.nodes.filter((node, i) => node !== undefined && i !== restarting) as NodeProcess[];
      await Promise.all(
        ids.map(async ({ id, algorithm }) => {
          const node = targets[n++ % targets.length]!;
          const index = cluster.nodes.indexOf(node);
          inFlight[index] = inFlight[index]! + 1;
          try {
            const r = await hit(node, id, LIMIT, { algorithm, duration: YEAR });
            sent++;
            if (r.status === 200) {
              allowed.set(id, (allowed.get(id) ?? 0) + 1);
              if (r.json.data.degraded) degraded++;
            } else if (r.status !== 429) failures.push(`status ${r.status}`);
          } catch (err) {
            failures.push(`${(err as Error).message} from node ${index}`);
          } finally {
            inFlight[index] = inFlight[index]! - 1;
          }
        }),
      );
    }
  })();

  for (let i = 0; i < 3; i++) {
    restarting = i;
    // The requests already sent to node i finish first (a fixed 150 ms was too short on a
    // loaded machine: a request still on its way met the draining node closing its connections).
    await eventually(() => inFlight[i] === 0, 20_000);
    cluster.nodes[i]!.signal("SIGTERM");
    const exit = await cluster.nodes[i]!.exited;
    t.equal(exit.code, 0, `node ${i} drained and exited 0`);
    const next = await cluster.restart(i);
    await waitForRing(cluster.nodes as NodeProcess[], 3);
    restarting = -1;
    t.ok(next.pid > 0);
    await sleep(600);
  }
  running = false;
  await load;

  const over = ids.reduce((sum, { id }) => sum + Math.max(0, (allowed.get(id) ?? 0) - LIMIT), 0);
  t.comment(
    `rolling restart: ${sent} requests, ${failures.length} failed, ${degraded} degraded answers, over-admission ${over} requests over ${ids.length} keys x limit ${LIMIT}`,
  );
  t.same(failures, [], "no failed request to a surviving node");
  t.ok(sent > ids.length * LIMIT, "load ran well past every limit");
  // Leave and join are both exact or fail open, so every request over a limit is one of
  // the fail-open answers given while a state was moving (each allowed and not counted).
  t.ok(over <= degraded, `over-admission ${over} is accounted for by ${degraded} fail-open answers`);
  t.ok(over <= 0.05 * ids.length * LIMIT, `over-admission ${over} within 5% of ${ids.length * LIMIT}`);
});

t.test("a joining node never decides a moved key on a partial state: exact or fail open", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const [a, b] = cluster.nodes as NodeProcess[];
  const id = cluster.identifierOwnedBy(2, "joining");
  cluster.nodes[2]!.signal("SIGTERM");
  await cluster.nodes[2]!.exited;
  await waitForRing([a!, b!], 2);
  for (let i = 0; i < 5; i++) t.equal((await hit(a!, id, 100, { duration: YEAR })).status, 200);

  // Restart the owner and ask it directly while it is still joining (its peers reconnect
  // to it with backoff, so the hand-off of this key reaches it a moment later).
  const joiner = await spawnNode(cluster.env[2]!, { waitReady: false });
  cluster.nodes[2] = joiner;
  const answers: { degraded: boolean; count: number; ready: boolean }[] = [];
  // Ends as soon as the node is ready and has decided exactly twice; generous for a loaded machine.
  const deadline = Date.now() + 20_000;
  let expected = 6;
  let readySeen = false;
  while (Date.now() < deadline && !(readySeen && expected > 8)) {
    // Asked before the request: a fail-open answer is a failure only if the node had already said it was ready.
    const ready = (await request(joiner.url + "/ready").catch(() => ({ status: 0 }))).status === 200;
    let r: Reply;
    try {
      r = await hit(joiner, id, 1000, { duration: YEAR });
    } catch {
      await sleep(10);
      continue; // not listening yet
    }
    readySeen ||= ready;
    const d = r.json.data;
    answers.push({ degraded: d.degraded === true, count: d.count, ready });
    if (!d.degraded) {
      if (d.count !== expected) return void t.fail(`decided on a partial state: count ${d.count}, expected ${expected}`);
      expected++;
    } else if (ready) {
      return void t.fail("a fail-open answer after the node said it was ready");
    }
  }
  const degraded = answers.filter((x) => x.degraded).length;
  t.comment(`${answers.length} answers from the joining node: ${degraded} fail-open while its state was on the way, then exact`);
  t.ok(readySeen, "the node became ready once every member had handed over");
  t.ok(expected > 8, "after joining, the node decides the key exactly, continuing its count");
});
