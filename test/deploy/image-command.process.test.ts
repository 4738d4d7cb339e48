/**
 * The image's /bin/ratelimit (deploy/image/ratelimit), run as Envoy Gateway runs it: as uid and
 * gid 65534, on a read-only root filesystem (a private mount namespace with / remounted
 * read-only), with CONFIG_TYPE=GRPC_XDS_SOTW and no config yet. It serves /healthcheck and
 * the RLS port, and SIGTERM sent to the PID the container runtime knows (the script's) reaches
 * node, which drains and exits 0. Needs root for the namespace; skipped otherwise.
 */
import { execFileSync } from "node:child_process";
import path from "node:path";
import t from "tap";
import { spawnProtected } from "../harness/child-processes.js";
import { request } from "../harness/http-client.js";
import { MAIN, ROOT } from "../harness/paths.js";
import { freePort } from "../harness/ports.js";
import { until } from "../harness/wait.js";

const SCRIPT = path.join(ROOT, "deploy/image/ratelimit");
const canNamespace = (() => {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync("unshare", ["-m", "--propagation", "private", "true"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

t.test(
  "/bin/ratelimit as user 65534 on a read-only root filesystem, SIGTERM to its PID",
  { skip: canNamespace ? false : "needs root and unshare" },
  async (t) => {
    const [port, grpcPort, xdsPort] = [await freePort(), await freePort(), await freePort()];
    const env = {
      PATH: process.env.PATH ?? "",
      RINGLIMIT_MAIN: MAIN,
      HOST: "127.0.0.1",
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      CONFIG_TYPE: "GRPC_XDS_SOTW",
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
      FORCE_START_WITHOUT_INITIAL_CONFIG: "true",
      LOG_LEVEL: "info",
    };
    // unshare, sh, setpriv, env and the script all exec: the PID spawned here ends up being node's.
    const inner = `mount -o remount,bind,ro / && touch /ringlimit-ro-probe 2>/dev/null && exit 99; exec setpriv --reuid=65534 --regid=65534 --clear-groups sh "${SCRIPT}"`;
    const child = spawnProtected("unshare", ["-m", "--propagation", "private", "sh", "-c", inner], { env });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    t.teardown(() => child.signalGroup("SIGKILL"));
    await until("/healthcheck", async () => (await request(`http://127.0.0.1:${port}/healthcheck`).catch(() => ({ status: 0 }))).status === 200, 60_000);
    t.match(out, /"msg":"ringlimit node listening"/, "started");
    t.notMatch(out, /RINGLIMIT_MAIN/, "the script's own variable does not reach ringlimit");
    const uid = execFileSync("ps", ["-o", "uid=,comm=", "-p", String(child.pid)])
      .toString()
      .trim();
    t.match(uid, /^65534\s+node$/, "the spawned PID is node, running as 65534");
    child.kill("SIGTERM");
    const code = await child.closed;
    t.equal(code, 0, `exit 0 after the drain:\n${out}`);
    t.match(out, /"msg":"ringlimit node stopped"/);
  },
);
