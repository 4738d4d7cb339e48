import { networkInterfaces } from "node:os";

/** Split `host:port` or `[v6]:port`. */
export function splitHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(":");
  let host = address.slice(0, colon);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  return { host, port: Number(address.slice(colon + 1)) };
}

const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * Which entry of the member list is this node: the entry that is literally our NODE_ID,
 * or whose port is our peer port and whose host is where the peer listener is bound.
 * Bound to a wildcard, that is any of this machine's addresses (in Kubernetes: the pod
 * IP a headless Service resolves to); bound to one address, only that address, since
 * several nodes on one machine may share a port on different addresses (127.0.0.1–3).
 */
export function findSelf(members: readonly string[], peerHost: string, peerPort: number, nodeId: string | undefined): string | undefined {
  const local = new Set<string>([peerHost]);
  if (WILDCARDS.has(peerHost)) {
    local.add("localhost");
    for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) local.add(i.address);
  }
  return members.find((m) => {
    if (m === nodeId) return true;
    const { host, port } = splitHostPort(m);
    return port === peerPort && local.has(host);
  });
}

/**
 * The URL clients reach this node at when ADVERTISE_URL is not set: its HTTP port on the
 * host it listens on. A wildcard listener is reached at the host of its ring name when that
 * is an address (in Kubernetes: the pod IP a headless Service resolves to), else at this
 * machine's first external IPv4 address.
 */
export function defaultAdvertiseUrl(options: { tls: boolean; host: string; port: number; ringName?: string }): string {
  let host = options.host;
  if (WILDCARDS.has(host)) {
    const fromRing = options.ringName === undefined ? undefined : splitHostPort(options.ringName).host;
    host = fromRing !== undefined && fromRing !== "" && !WILDCARDS.has(fromRing) ? fromRing : firstExternalIPv4();
  }
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  return `${options.tls ? "https" : "http"}://${host}:${options.port}`;
}

function firstExternalIPv4(): string {
  for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) if (i.family === "IPv4" && !i.internal) return i.address;
  return "127.0.0.1";
}
