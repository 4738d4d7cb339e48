import path from "node:path";
import { loadPackageDefinition, Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import protobuf from "protobufjs";
import { ADS_PROTO, RATE_LIMIT_CONFIG_TYPE, RLS_CONF_PROTO, XDS_PROTO_DIR } from "../../../src/policy/xds/index.js";

/**
 * A state-of-the-world ADS management server for tests, on grpc-js and the package's own
 * .proto files, behaving as go-control-plane's (Envoy Gateway's) does: each new stream's first
 * request gets the current snapshot when its version_info differs from the snapshot's; every
 * set() pushes the new snapshot to every open stream with a fresh nonce; ACKs and NACKs are
 * recorded, not answered.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Message = any;

export interface XdsServer {
  readonly port: number;
  readonly address: string;
  /** every DiscoveryRequest received, in order, on any stream */
  readonly requests: Message[];
  /** streams opened so far */
  streams(): number;
  /** the snapshot now served: version and RateLimitConfig resources (plain objects, `.proto` field names) */
  set(version: string, configs: readonly Message[]): void;
  /** push raw Any resources (to send what is not a RateLimitConfig) */
  setRaw(version: string, resources: readonly { type_url: string; value: Buffer }[]): void;
  /** the nonce of the last response sent */
  lastNonce(): string;
  close(): Promise<void>;
}

const definition = loadSync([ADS_PROTO], { includeDirs: [XDS_PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: false });
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const ads = (loadPackageDefinition(definition) as any).envoy.service.discovery.v3.AggregatedDiscoveryService;
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => path.join(XDS_PROTO_DIR, target);
root.loadSync(RLS_CONF_PROTO, { keepCase: true });
const RateLimitConfig = root.lookupType("ratelimit.config.ratelimit.v3.RateLimitConfig");

/** A RateLimitConfig as the bytes of an Any (enums by name or number). */
export function rateLimitConfigAny(config: Message): { type_url: string; value: Buffer } {
  const problem = RateLimitConfig.verify(RateLimitConfig.fromObject(config));
  if (problem !== null) throw new Error(problem);
  return { type_url: RATE_LIMIT_CONFIG_TYPE, value: Buffer.from(RateLimitConfig.encode(RateLimitConfig.fromObject(config)).finish()) };
}

export interface XdsServerOptions {
  port?: number;
  /** TLS with this certificate; `ca` set: client certificates required (mutual TLS) */
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer };
}

export async function startXdsServer(options: XdsServerOptions = {}): Promise<XdsServer> {
  const server = new Server();
  const open = new Set<ServerDuplexStream<Message, Message>>();
  const requests: Message[] = [];
  let snapshot: { version: string; resources: { type_url: string; value: Buffer }[] } | undefined;
  let nonce = 0;
  let streams = 0;
  const push = (call: ServerDuplexStream<Message, Message>) => {
    if (snapshot === undefined) return;
    call.write({ version_info: snapshot.version, resources: snapshot.resources, type_url: RATE_LIMIT_CONFIG_TYPE, nonce: String(++nonce) });
  };
  server.addService(ads.service, {
    StreamAggregatedResources(call: ServerDuplexStream<Message, Message>) {
      streams++;
      open.add(call);
      let first = true;
      call.on("data", (request: Message) => {
        requests.push(request);
        if (first) {
          first = false;
          if (snapshot !== undefined && request.version_info !== snapshot.version) push(call);
        }
      });
      const done = () => {
        open.delete(call);
        call.end();
      };
      call.on("end", done);
      call.on("error", () => open.delete(call));
      call.on("cancelled", () => open.delete(call));
    },
  });
  const creds =
    options.tls === undefined
      ? ServerCredentials.createInsecure()
      : ServerCredentials.createSsl(options.tls.ca ?? null, [{ private_key: options.tls.key, cert_chain: options.tls.cert }], options.tls.ca !== undefined);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${options.port ?? 0}`, creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  const setRaw = (version: string, resources: readonly { type_url: string; value: Buffer }[]) => {
    snapshot = { version, resources: [...resources] };
    for (const call of open) push(call);
  };
  return {
    port,
    address: `127.0.0.1:${port}`,
    requests,
    streams: () => streams,
    set: (version, configs) => setRaw(version, configs.map(rateLimitConfigAny)),
    setRaw,
    lastNonce: () => String(nonce),
    close: () =>
      new Promise<void>((resolve) => {
        // A management server that goes away: streams cut, the port closed.
        server.forceShutdown();
        resolve();
      }),
  };
}
