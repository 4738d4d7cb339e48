import path from "node:path";
import { fileURLToPath } from "node:url";

// Tests run compiled, from dist/test/: these are the checkout's paths from there.

/** The repository's root. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** The compiled entry point, `node dist/src/main.js`. */
export const MAIN = path.join(ROOT, "dist/src/main.js");
