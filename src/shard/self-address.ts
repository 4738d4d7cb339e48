import { networkInterfaces } from "node:os";

/** Split `host:port` or `[v6]:port`. */
export function splitHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(":");
  let host = address.slice(0, colon);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  return { host, port: Number(address.slice(colon + 1)) };
}

/**
 * Which entry of the member list is this node. A member is this node when its port is
 * our peer port and its host is our PEER_HOST or one of this machine's own addresses
 * (in Kubernetes: the pod IP a headless Service resolves to), or when the entry is
 * literally our NODE_ID.
 */
export function findSelf(members: readonly string[], peerHost: string, peerPort: number, nodeId: string | undefined): string | undefined {
  const local = new Set<string>(["localhost", peerHost]);
  for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) local.add(i.address);
  return members.find((m) => {
    if (m === nodeId) return true;
    const { host, port } = splitHostPort(m);
    return port === peerPort && local.has(host);
  });
}
