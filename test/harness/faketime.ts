import { existsSync } from "node:fs";

/** libfaketime where Debian puts it (apt-get install -y libfaketime), or undefined: a node with it preloaded runs on a shifted clock. */
export const LIBFAKETIME = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
].find((p) => existsSync(p));
