/**
 * Two members of one ring take their policy from one xDS server: each compiles the same
 * resources to the same content-hash version, tells it with its heartbeats, and GET /cluster
 * on either member lists that version for both, after the first version and after a change;
 * a clustered member does not warn that it counts alone.
 */
import t from "tap";
import { AUTH_HEADER, request } from "../../harness/http-client.js";
import { startCluster } from "../../harness/cluster.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { until } from "../../harness/wait.js";
import { startXdsServer } from "./xds-server.js";

const config = (limit: number) => ({
  name: "edge",
  domain: "edge",
  descriptors: [{ key: "remote_address", rate_limit: { unit: "MINUTE", requests_per_unit: limit } }],
});

const versions = async (node: NodeProcess): Promise<(string | null)[]> => {
  const body = JSON.parse((await request(`${node.url}/cluster`, { headers: AUTH_HEADER })).text);
  return body.data.members.map((m: { policy_version: string | null }) => m.policy_version);
};

t.test("every member answers from the same xDS version, and GET /cluster shows it", async (t) => {
  const server = await startXdsServer();
  t.teardown(() => server.close());
  server.set("1", [config(10)]);
  const grpcPorts = [await freePort(), await freePort()];
  const cluster = await startCluster(
    2,
    {
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_URL: server.address,
      CONFIG_GRPC_XDS_NODE_ID: "envoy-ratelimit",
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "100ms",
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: "500ms",
    },
    (i) => ({ GRPC_PORT: String(grpcPorts[i]) }),
  );
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes as NodeProcess[];
  const agreed = async () => {
    const seen = await Promise.all(nodes.map(versions));
    const all = seen.flat();
    return all.every((v) => v !== null && v === all[0]) ? all[0]! : undefined;
  };
  let first: string | undefined;
  await until("both members on one version", async () => (first = await agreed()) !== undefined, 20_000);
  t.match(first, /^[0-9a-f]{12}$/, "a content-hash version");
  server.set("2", [config(20)]);
  let second: string | undefined;
  await until("both members on the next version", async () => (second = await agreed()) !== undefined && second !== first, 20_000);
  t.not(second, first);
  for (const node of nodes) t.notMatch(node.output(), /counts alone/, "a member of a ring does not count alone");
});
