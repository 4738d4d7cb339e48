import net from "node:net";

/**
 * Which member URLs of GET /cluster the client sends its API key to (docs/client.md, "What
 * the client trusts"). A node's answer is not enough: whoever can answer GET /cluster (a
 * compromised node, a spoofed DNS name, a proxy) could otherwise list a host of its own and
 * collect the key. A member is used only when
 *
 *  - its scheme is not weaker than the seeds': from an https:// seed, https:// members only;
 *  - its host is allowed: by default, the seeds' own hosts; `memberHosts` widens that with
 *    exact names, `*.suffix` wildcards and IPv4/IPv6 CIDR ranges (`10.0.0.0/8`, `fd00::/8`).
 *
 * A member that is not used keeps its place on the ring; its keys go through a seed, which
 * forwards them.
 */
export class MemberPolicy {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];
  private readonly ranges = new net.BlockList();
  private readonly httpsOnly: boolean;

  constructor(seedUrls: readonly string[], memberHosts: readonly string[] | undefined) {
    const seeds = seedUrls.map((u) => new URL(u));
    this.httpsOnly = seeds.some((u) => u.protocol === "https:");
    for (const u of seeds) this.exact.add(hostOf(u));
    for (const entry of memberHosts ?? []) {
      const host = entry.trim().toLowerCase();
      const slash = host.indexOf("/");
      if (slash > 0) {
        const address = host.slice(0, slash);
        const prefix = Number(host.slice(slash + 1));
        const family = net.isIP(address);
        if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128))
          throw new TypeError(`RingLimitClient: memberHosts: not a CIDR range: ${entry}`);
        this.ranges.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
      } else if (host.startsWith("*.")) {
        this.suffixes.push(host.slice(1));
      } else if (host !== "") {
        this.exact.add(host);
      } else {
        throw new TypeError("RingLimitClient: memberHosts: an empty entry");
      }
    }
  }

  /** Why `url` may not receive the key, or undefined when it may. */
  refusal(url: URL): string | undefined {
    if (this.httpsOnly && url.protocol !== "https:") return "a plain http:// member of an https:// cluster (the key is never sent unencrypted there)";
    const host = hostOf(url);
    if (this.exact.has(host)) return undefined;
    for (const s of this.suffixes) if (host.endsWith(s)) return undefined;
    const family = net.isIP(host);
    if (family !== 0 && this.ranges.check(host, family === 4 ? "ipv4" : "ipv6")) return undefined;
    return "a host outside the seeds' and memberHosts";
  }
}

/** The hostname, lower-case, without the brackets of an IPv6 literal. */
function hostOf(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[|\]$/g, "");
}
