import { credentials, loadPackageDefinition, Metadata, type Client, type ServiceError } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { HEALTH_PROTO, PROTO_DIR, RLS_PROTO } from "../../src/rls/wire/protos.js";

/** A real gRPC client of the node's gRPC port, on grpc-js and the package's own .proto files, enums as names. */
const definition = loadSync([RLS_PROTO, HEALTH_PROTO], {
  includeDirs: [PROTO_DIR],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: false,
});
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const pkg = loadPackageDefinition(definition) as any;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Message = any;

export interface RlsClient {
  shouldRateLimit(request: Message, key?: string | null): Promise<Message>;
  check(service?: string): Promise<Message>;
  /** the first `n` messages of a Watch stream; `onMessage` sees each as it comes */
  watch(n: number, service?: string, onMessage?: (m: Message) => void): Promise<Message[]>;
  close(): void;
}

export interface ClientOptions {
  /** default: the harness's test key; null: no authorization metadata */
  key?: string | null;
  /** PEM CA for TLS; unset: plaintext */
  ca?: Buffer;
  /** with `ca`: the client certificate and key this client presents (mutual TLS) */
  clientCert?: { cert: Buffer; key: Buffer };
  deadlineMs?: number;
  /** grpc-js channel options, e.g. { "grpc.use_local_subchannel_pool": 1 }: a connection of this client's own */
  channelOptions?: Record<string, string | number>;
}

export function rlsClient(address: string, options: ClientOptions = {}): RlsClient {
  const creds =
    options.ca === undefined
      ? credentials.createInsecure()
      : credentials.createSsl(options.ca, options.clientCert?.key ?? null, options.clientCert?.cert ?? null);
  const rls: Client & Record<string, Function> = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, creds, options.channelOptions);
  const health: Client & Record<string, Function> = new pkg.grpc.health.v1.Health(address, creds, options.channelOptions);
  const deadline = () => new Date(Date.now() + (options.deadlineMs ?? 10_000));
  return {
    shouldRateLimit(request, key = options.key) {
      const md = new Metadata();
      if (key !== null && key !== undefined) md.set("authorization", `Bearer ${key}`);
      return new Promise((resolve, reject) =>
        rls.ShouldRateLimit!(request, md, { deadline: deadline() }, (err: ServiceError | null, res: Message) => (err ? reject(err) : resolve(res))),
      );
    },
    check(service = "") {
      return new Promise((resolve, reject) =>
        health.Check!({ service }, { deadline: deadline() }, (err: ServiceError | null, res: Message) => (err ? reject(err) : resolve(res))),
      );
    },
    watch(n, service = "", onMessage) {
      return new Promise((resolve, reject) => {
        const got: Message[] = [];
        const call = health.Watch!({ service });
        call.on("data", (m: Message) => {
          got.push(m);
          onMessage?.(m);
          if (got.length === n) {
            call.cancel();
            resolve(got);
          }
        });
        call.on("error", (err: ServiceError) => {
          if (got.length < n) reject(err);
        });
      });
    },
    close() {
      rls.close();
      health.close();
    },
  };
}

/** The gRPC status code of a failed call (grpc.status numbers). */
export async function grpcCode(call: Promise<unknown>): Promise<{ code: number; details: string } | undefined> {
  try {
    await call;
    return undefined;
  } catch (err) {
    const e = err as ServiceError;
    return { code: e.code, details: e.details };
  }
}

/** A request of one descriptor. */
export function oneDescriptor(domain: string, entries: [string, string][], extra: Message = {}): Message {
  return { domain, descriptors: [{ entries: entries.map(([key, value]) => ({ key, value })), ...extra }] };
}
