#!/usr/bin/env node
import { generateApiKey } from "./http/auth.js";
import { ConfigError, loadConfig } from "./config.js";
import { startNode } from "./node.js";

/**
 * `ringlimit` starts a node; `ringlimit keygen` prints a new API key and its SHA-256 (for
 * API_KEY_HASHES). Configuration errors end start-up with one line naming the variable.
 */
async function main(argv: string[]): Promise<void> {
  if (argv[0] === "keygen") {
    const { key, sha256 } = generateApiKey();
    process.stdout.write(`API key:        ${key}\nSHA-256 (hash): ${sha256}\n`);
    return;
  }
  let config;
  try {
    config = loadConfig(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`ringlimit: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const node = await startNode(config);
  const logger = node.logger;

  let signalled = false;
  const shutdown = (signal: string) => {
    if (signalled) return;
    signalled = true;
    logger.info({ signal }, "shutting down");
    node.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // A fault in one request must not take the node down; log it and keep serving.
  process.on("uncaughtException", (err) => logger.error({ err }, "uncaught exception"));
  process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`ringlimit: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
