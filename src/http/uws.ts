/**
 * The uWebSockets.js build this process runs on: one of two registry builds, chosen once at
 * start by which one the host can load (docs/node-versions.md).
 *
 * - `uWebSockets.js` (upstream v20.57, ABIs 115/127/137/141) is preferred: it is the only one
 *   with Node 24's ABI 137. Its Linux binaries need glibc 2.38 (Debian 13, the Docker image).
 * - `uws-pack` (upstream v20.4x, ABIs 108–127, glibc 2.27) is the fallback for a host with an
 *   older glibc (Debian 12) on Node 22 or 20: the newer build fails to load there.
 *
 * The code compiles against the newer build's typings; both builds provide the four run-time
 * values taken here, with the same behaviour for what this service uses (the suite runs on
 * both: Node 22 on the CI machine takes the fallback, Node 24 in Debian 13 the preferred one).
 */
import { createRequire } from "node:module";
import type * as Uws from "uWebSockets.js";

type Runtime = Pick<typeof Uws, "App" | "SSLApp" | "us_listen_socket_close" | "us_socket_local_port">;

/** Which build was loaded, for the start-up log and the tests. */
export type UwsBuild = "uWebSockets.js v20.57.0" | "uws-pack 20.0.8";

async function load(): Promise<{ runtime: Runtime; build: UwsBuild }> {
  try {
    // require, not import: on Node 20 a CommonJS module that throws while an ES module
    // imports it ends the process instead of rejecting the import (seen with v20.20).
    const newest = createRequire(import.meta.url)("uWebSockets.js") as Runtime;
    return { runtime: newest, build: "uWebSockets.js v20.57.0" };
  } catch (preferred) {
    try {
      const fallback = (await import("uws-pack")) as unknown as Runtime;
      return { runtime: fallback, build: "uws-pack 20.0.8" };
    } catch {
      // Neither loads (Node 24 on glibc < 2.38, or an ABI neither ships): the preferred
      // build's error names the Node versions it supports and the missing glibc symbol.
      throw preferred;
    }
  }
}

const loaded = await load();

export const uwsBuild: UwsBuild = loaded.build;
export const { App, SSLApp, us_listen_socket_close, us_socket_local_port } = loaded.runtime;
