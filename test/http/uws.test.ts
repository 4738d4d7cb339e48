/**
 * src/http/uws.ts: the v20.57 build is loaded wherever it can be, and uws-pack only where it
 * cannot, which is a glibc older than 2.38 (docs/node-versions.md). Runs on both CI lanes:
 * Node 22 on Debian 12 takes the fallback, Node 24 on Debian 13 the preferred build.
 */
import { createRequire } from "node:module";
import t from "tap";
import { App, SSLApp, us_listen_socket_close, us_socket_local_port, uwsBuild } from "../../src/http/uws.js";

const require = createRequire(import.meta.url);
const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;
const [major, minor] = (glibc ?? "0.0").split(".").map(Number) as [number, number];
const modernGlibc = major > 2 || (major === 2 && minor >= 38);

let preferredLoads = true;
try {
  require("uWebSockets.js");
} catch {
  preferredLoads = false;
}

t.test("the preferred build is taken exactly when it loads", async (t) => {
  t.equal(uwsBuild, preferredLoads ? "uWebSockets.js v20.57.0" : "uws-pack 20.0.8", `loaded: ${uwsBuild} (glibc ${glibc})`);
});

t.test("whether it loads is a matter of glibc 2.38", { skip: process.platform !== "linux" && "Linux only" }, async (t) => {
  t.equal(preferredLoads, modernGlibc, `glibc ${glibc}: v20.57 ${preferredLoads ? "loads" : "does not load"}`);
});

t.test("both builds give the four values the server uses", async (t) => {
  for (const [name, value] of Object.entries({ App, SSLApp, us_listen_socket_close, us_socket_local_port })) t.type(value, "function", name);
  const app = App();
  const port = await new Promise<number>((resolve, reject) =>
    app.listen("127.0.0.1", 0, (socket) => {
      if (socket === false) return reject(new Error("listen failed"));
      resolve(us_socket_local_port(socket));
      us_listen_socket_close(socket);
    }),
  );
  t.ok(port > 0, `listened on ${port} and closed`);
  app.close();
});
