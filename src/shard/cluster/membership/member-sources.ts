import { promises as dnsPromises } from "node:dns";
import type { Logger } from "../../../logger.js";

/**
 * Where the configured member list comes from. Members are `host:peerPort` strings: the
 * names every node puts on its ring, so every node must see the same strings.
 */
export interface MembershipSource {
  start(onChange: (members: readonly string[]) => void): void;
  stop(): void;
}

/** PEERS: a fixed list. */
export class StaticMembership implements MembershipSource {
  constructor(private readonly members: readonly string[]) {}

  start(onChange: (members: readonly string[]) => void): void {
    onChange([...new Set(this.members)].sort());
  }

  stop(): void {}
}

/**
 * PEERS_DNS: every address a name resolves to is a member (a Kubernetes headless
 * Service), re-resolved every `intervalMs`. A failed lookup keeps the last known list:
 * a DNS outage must not empty the ring.
 */
export class DnsMembership implements MembershipSource {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private last = "";
  private readonly resolver: dnsPromises.Resolver | undefined;

  constructor(
    private readonly name: string,
    private readonly port: number,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    /** `host:port` of a DNS server; default: the system resolver (getaddrinfo, /etc/hosts, search domains) */
    server?: string,
  ) {
    if (server !== undefined) {
      this.resolver = new dnsPromises.Resolver({ timeout: Math.min(2000, intervalMs), tries: 2 });
      this.resolver.setServers([server]);
    }
  }

  start(onChange: (members: readonly string[]) => void): void {
    const tick = async () => {
      try {
        const addresses = await this.resolve();
        const members = [...new Set(addresses.map((a) => (a.includes(":") ? `[${a}]` : a) + ":" + this.port))].sort();
        const joined = members.join(",");
        if (joined !== this.last) {
          this.last = joined;
          this.logger.info({ name: this.name, members }, "DNS membership changed");
          onChange(members);
        }
      } catch (err) {
        this.logger.warn({ err: (err as Error).message, name: this.name }, "DNS membership lookup failed; keeping the last known members");
      }
      if (this.stopped) return;
      this.timer = setTimeout(tick, this.intervalMs);
      this.timer.unref();
    };
    void tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async resolve(): Promise<string[]> {
    if (this.resolver !== undefined) return this.resolver.resolve4(this.name);
    const results = await dnsPromises.lookup(this.name, { all: true });
    return results.map((r) => r.address);
  }
}
