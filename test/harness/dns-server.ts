import type { AddressInfo } from "node:net";
import dns2 from "dns2";

const { Packet } = dns2;

export interface TestDnsServer {
  /** `127.0.0.1:port`, the form DNS_SERVER takes */
  readonly address: string;
  /** answer `name` with these A records from now on (an empty list: NXDOMAIN-like empty answer) */
  setRecords(name: string, addresses: string[]): void;
  /** stop answering (a DNS outage); safe to call twice */
  close(): Promise<void>;
}

/**
 * A real DNS server (UDP, in JavaScript: dns2) on 127.0.0.1 and a port the OS picks.
 * A records only, TTL 0, served from a table the test edits: what a Kubernetes headless
 * Service looks like to a resolver, without dnsmasq.
 */
export async function startDnsServer(): Promise<TestDnsServer> {
  const records = new Map<string, string[]>();
  const server = dns2.createServer({
    udp: true,
    handle(request, send) {
      const response = Packet.createResponseFromRequest(request);
      for (const question of request.questions) {
        if (question.type !== Packet.TYPE.A) continue;
        for (const address of records.get(question.name.toLowerCase()) ?? []) {
          response.answers.push(Packet.createResourceFromQuestion(question, { ttl: 0, address }));
        }
      }
      void send(response);
    },
  });
  const listening = await server.listen({ udp: { port: 0, address: "127.0.0.1" } });
  const port = (listening.udp as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    address: `127.0.0.1:${port}`,
    setRecords: (name, addresses) => records.set(name.toLowerCase(), [...addresses]),
    close: () => (closed ??= server.close()),
  };
}
