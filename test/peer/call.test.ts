import t from "tap";
import { randomBytes } from "node:crypto";
import { PeerError } from "../../src/peer/index.js";
import { decideQuery, connectedPair, echoHandler, makeClient, startStuckServer } from "./helpers.js";
import { waitEvent } from "../harness/wait.js";

t.test("call(): a 200 KiB payload round trip, with the caller identified", async (t) => {
  const seen: Array<[number, string]> = [];
  const handler = {
    ...echoHandler(),
    async call(method: number, payload: Buffer, from: string): Promise<Buffer> {
      seen.push([method, from]);
      return Buffer.concat([Buffer.from("echo:"), payload]);
    },
  };
  const { client } = await connectedPair(t, handler);
  const payload = randomBytes(200 * 1024);
  const [a, b] = await Promise.all([client.call(7, payload, 5_000), client.call(8, Buffer.alloc(0), 5_000)]);
  t.ok(a.equals(Buffer.concat([Buffer.from("echo:"), payload])), "payload intact");
  t.equal(b.toString(), "echo:");
  t.same(seen, [
    [7, "client-1"],
    [8, "client-1"],
  ]);
  // Decisions keep flowing alongside calls.
  const r = await new Promise<number>((resolve) => client.decide(decideQuery("ns", "id", 0, 10, 60), (_e, res) => resolve(res!.remaining)));
  t.equal(r, 9);
});

t.test("call(): handler errors come back as remote errors", async (t) => {
  const handler = {
    ...echoHandler(),
    async call(method: number): Promise<Buffer> {
      if (method === 1) throw new Error("state store unavailable");
      if (method === 2) return "not a buffer" as unknown as Buffer;
      throw "a string";
    },
  };
  const { client } = await connectedPair(t, handler);
  await t.rejects(client.call(1, Buffer.from("x"), 1_000), { code: "remote", message: "state store unavailable" });
  await t.rejects(client.call(2, Buffer.from("x"), 1_000), { code: "remote", message: /must resolve to a Buffer/ });
  await t.rejects(client.call(3, Buffer.from("x"), 1_000), { code: "remote", message: "a string" });
  const err = await client.call(1, Buffer.alloc(0), 1_000).catch((e: unknown) => e);
  t.ok(err instanceof PeerError);
  t.equal(client.state, "up", "connection unaffected");
});

t.test("call(): a server without a call handler answers an error", async (t) => {
  const { client } = await connectedPair(t, echoHandler());
  await t.rejects(client.call(4, Buffer.alloc(1), 1_000), { code: "remote", message: /no call handler/ });
});

t.test("call(): refused locally when it cannot be sent, timeout when unanswered", async (t) => {
  const stuck = await startStuckServer();
  const client = makeClient(stuck.port);
  t.teardown(async () => {
    client.close();
    await stuck.close();
  });
  await t.rejects(client.call(1, Buffer.alloc(0)), { code: "unavailable" });
  client.connect();
  await waitEvent(client, "up");
  await t.rejects(client.call(1, Buffer.alloc(1024 * 1024)), { code: "too_large" });
  await t.rejects(client.call(70_000, Buffer.alloc(0)), { code: "invalid" });
  const start = performance.now();
  await t.rejects(client.call(1, Buffer.alloc(10), 150), { code: "timeout" });
  const took = performance.now() - start;
  t.ok(took >= 145 && took < 600, `timed out after ${took.toFixed(0)} ms`);
  // A call in flight when the connection drops is rejected at once.
  const pending = client.call(1, Buffer.alloc(10), 5_000);
  stuck.dropConnections();
  await t.rejects(pending, { code: "unavailable" });
});

t.test("call(): one timer for every call: a short call after a long one times out first, answered calls never do", async (t) => {
  // Method 9 is never answered (the handler waits until the test ends); the others answer at once.
  let release = (): void => {};
  const never = new Promise<void>((r) => (release = r));
  t.teardown(() => release());
  const handler = {
    ...echoHandler(),
    async call(method: number): Promise<Buffer> {
      if (method === 9) await never;
      return Buffer.from([method]);
    },
  };
  const { client } = await connectedPair(t, handler);
  const order: string[] = [];
  const long = client.call(9, Buffer.alloc(0), 5_000).then(
    () => order.push("long answered"),
    (e: PeerError) => order.push(`long ${e.code}`),
  );
  // Answered calls of a shorter timeout than the timer armed: each settles once, with its reply.
  const answered = await Promise.all(Array.from({ length: 50 }, (_, i) => client.call(1 + (i % 8), Buffer.alloc(0), 2_000)));
  t.same(
    answered.map((b) => b[0]),
    Array.from({ length: 50 }, (_, i) => 1 + (i % 8)),
  );
  const short = client.call(9, Buffer.alloc(0), 300).then(
    () => order.push("short answered"),
    (e: PeerError) => order.push(`short ${e.code}`),
  );
  await short;
  t.same(order, ["short timeout"], "the short call expired while the long one still waits");
  await long;
  t.same(order, ["short timeout", "long timeout"]);
  t.equal(client.state, "up", "time-outs leave the connection up");
});
