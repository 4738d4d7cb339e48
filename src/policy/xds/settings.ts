import type { RatelimitSettings } from "../../config/envoy-ratelimit.js";
import type { AdsClientOptions } from "./ads-client.js";

/** The xDS client's options from envoyproxy/ratelimit's settings (config/envoy-ratelimit.ts), checked by configFrom already. */
export function xdsClientOptionsOf(
  config: RatelimitSettings,
): Pick<AdsClientOptions, "serverUrl" | "nodeId" | "nodeMetadata" | "headers" | "tls" | "backoffInitialMs" | "backoffMaxMs" | "maxMessageBytes"> {
  return {
    serverUrl: config.xdsServerUrl,
    nodeId: config.xdsNodeId,
    nodeMetadata: pairs(config.xdsNodeMetadata, "="),
    headers: pairs(config.xdsClientHeaders, ":"),
    ...(config.xdsServerUseTls
      ? {
          tls: {
            ...(config.xdsClientTlsCert !== undefined ? { certFile: config.xdsClientTlsCert } : {}),
            ...(config.xdsClientTlsKey !== undefined ? { keyFile: config.xdsClientTlsKey } : {}),
            ...(config.xdsServerTlsCaCert !== undefined ? { caFile: config.xdsServerTlsCaCert } : {}),
            ...(config.xdsServerTlsSan !== undefined ? { serverName: config.xdsServerTlsSan } : {}),
          },
        }
      : {}),
    backoffInitialMs: config.xdsBackoffInitialMs,
    backoffMaxMs: config.xdsBackoffMaxMs,
    maxMessageBytes: config.xdsMaxMessageBytes,
  };
}

/** `key=value` (or `key:value`) entries as a map; the first separator splits, so values may hold it. */
function pairs(entries: readonly string[], separator: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of entries) {
    const at = entry.indexOf(separator);
    if (at > 0) out[entry.slice(0, at).trim()] = entry.slice(at + 1).trim();
  }
  return out;
}
