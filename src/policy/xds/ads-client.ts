import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import { credentials, Metadata, type ChannelCredentials, type ClientDuplexStream, type ServiceError } from "@grpc/grpc-js";
import { certificatesOf } from "../../config/parsers.js";
import type { Logger } from "../../logger.js";
import { backoffDelayMs } from "./backoff.js";
import { xdsProtos, type AnyMessage, type DiscoveryResponseMessage } from "./protos.js";

/** google.rpc.Code INVALID_ARGUMENT: a NACK's code, as Envoy sends it for a config it cannot apply. */
const INVALID_ARGUMENT = 3;
/**
 * A management server that stops answering (a partition, not a restart) is noticed within
 * these bounds. Not more often: Go's gRPC servers (go-control-plane, Envoy Gateway's) close a
 * connection that pings more often than every 5 minutes by default (ENHANCE_YOUR_CALM).
 */
const KEEPALIVE_TIME_MS = 360_000;
const KEEPALIVE_TIMEOUT_MS = 20_000;

export interface AdsClientOptions {
  /** host:port of the management server */
  readonly serverUrl: string;
  readonly nodeId: string;
  readonly nodeMetadata: Readonly<Record<string, string>>;
  /** gRPC metadata sent when the stream opens */
  readonly headers: Readonly<Record<string, string>>;
  /** unset: plaintext; set: TLS 1.3, the files read again at each connection (a rotated certificate is picked up) */
  readonly tls?: { readonly certFile?: string; readonly keyFile?: string; readonly caFile?: string; readonly serverName?: string };
  readonly backoffInitialMs: number;
  readonly backoffMaxMs: number;
  readonly maxMessageBytes: number;
  readonly typeUrl: string;
  /**
   * Applies the resources of one response; returns the reason it could not (the response is
   * NACKed with it and the last applied version stays), or undefined (ACKed).
   */
  readonly apply: (versionInfo: string, resources: readonly AnyMessage[]) => string | undefined;
  readonly logger: Logger;
  readonly random?: () => number;
}

interface DiscoveryRequest {
  version_info: string;
  node: object;
  resource_names: string[];
  type_url: string;
  response_nonce: string;
  error_detail?: { code: number; message: string };
}

/**
 * A state-of-the-world ADS subscriber (envoy.service.discovery.v3.AggregatedDiscoveryService/
 * StreamAggregatedResources) for one resource type, with every resource of the type asked
 * (a wildcard subscription). The xDS protocol, as this client keeps it:
 * - each response is ACKed (its version_info and nonce) once applied, or NACKed (the last
 *   applied version, its nonce, and the reason in error_detail) when it cannot be: one
 *   request per response, sent only after the response is handled;
 * - versions are opaque: a response is applied whatever its version_info, lower or not (a
 *   management server that keeps its counter in memory starts again from "1" after a restart);
 * - a lost stream is opened again after a backoff (backoff.ts), and the new stream's first
 *   request carries an empty version_info, so the server answers with its state of the world
 *   even if its version string happens to equal the last one applied here (a restarted server
 *   may reuse it for other content). Whatever was applied stays in force meanwhile.
 */
export class AdsClient {
  private client: InstanceType<ReturnType<typeof xdsProtos>["Ads"]> | undefined;
  private call: ClientDuplexStream<DiscoveryRequest, DiscoveryResponseMessage> | undefined;
  /** the version of the last response applied, on any stream ("" before the first) */
  private applied = "";
  private attempt = 0;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;
  /** the stream is answered: the first loss after it is logged as a warning, the retries that follow at debug */
  private healthy = true;

  constructor(private readonly options: AdsClientOptions) {}

  /** the version_info of the last response applied; "" before the first */
  get version(): string {
    return this.applied;
  }

  start(): void {
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    this.drop();
  }

  private connect(): void {
    if (this.stopped) return;
    const o = this.options;
    let creds: ChannelCredentials;
    try {
      creds = credentialsOf(o.tls);
    } catch (err) {
      // A certificate file mid-rotation or unreadable: tried again with the next connection.
      this.lost(`cannot read the TLS files: ${(err as Error).message}`);
      return;
    }
    const { Ads } = xdsProtos();
    const client = new Ads(o.serverUrl, creds, {
      "grpc.max_receive_message_length": o.maxMessageBytes,
      "grpc.keepalive_time_ms": KEEPALIVE_TIME_MS,
      "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
      ...(o.tls?.serverName !== undefined ? { "grpc.ssl_target_name_override": o.tls.serverName } : {}),
    });
    const metadata = new Metadata();
    for (const [k, v] of Object.entries(o.headers)) metadata.set(k, v);
    const call = (
      client as unknown as Record<string, (m: Metadata) => ClientDuplexStream<DiscoveryRequest, DiscoveryResponseMessage>>
    ).StreamAggregatedResources!.call(client, metadata);
    this.client = client;
    this.call = call;
    let ended = false;
    const end = (reason: string) => {
      if (ended || this.call !== call) return;
      ended = true;
      this.drop();
      this.lost(reason);
    };
    call.on("data", (response: DiscoveryResponseMessage) => {
      if (this.call === call) this.onResponse(call, response);
    });
    call.on("error", (err: ServiceError) => end(err.details || err.message));
    call.on("end", () => end("the server ended the stream"));
    call.on("status", (s: { details: string }) => end(s.details || "the stream closed"));
    o.logger.info({ server: o.serverUrl, node: o.nodeId }, `xDS: subscribing to ${o.typeUrl} at ${o.serverUrl}`);
    this.send(call, { version_info: "", response_nonce: "" });
  }

  private onResponse(call: ClientDuplexStream<DiscoveryRequest, DiscoveryResponseMessage>, response: DiscoveryResponseMessage): void {
    const o = this.options;
    if (!this.healthy) o.logger.info({ server: o.serverUrl }, "xDS: the management server answers again");
    this.healthy = true;
    this.attempt = 0;
    if (response.type_url !== o.typeUrl) {
      // Only one type is asked; another is not ours to apply.
      this.send(call, { version_info: this.applied, response_nonce: response.nonce, error_detail: nack(`type ${response.type_url} was not asked for`) });
      return;
    }
    const problem = o.apply(response.version_info, response.resources);
    if (problem === undefined) {
      this.applied = response.version_info;
      this.send(call, { version_info: this.applied, response_nonce: response.nonce });
    } else {
      this.send(call, { version_info: this.applied, response_nonce: response.nonce, error_detail: nack(problem) });
    }
  }

  private send(
    call: ClientDuplexStream<DiscoveryRequest, DiscoveryResponseMessage>,
    request: Pick<DiscoveryRequest, "version_info" | "response_nonce" | "error_detail">,
  ): void {
    const o = this.options;
    const node = { id: o.nodeId, metadata: structOf(o.nodeMetadata), user_agent_name: "ringlimit" };
    call.write({ ...request, node, resource_names: [], type_url: o.typeUrl });
  }

  private drop(): void {
    const call = this.call;
    const client = this.client;
    this.call = undefined;
    this.client = undefined;
    call?.cancel();
    client?.close();
  }

  private lost(reason: string): void {
    if (this.stopped) return;
    const o = this.options;
    const delay = backoffDelayMs(this.attempt++, o.backoffInitialMs, o.backoffMaxMs, (o.random ?? Math.random)());
    const fields = { server: o.serverUrl, reason, retryInMs: delay, version: this.applied };
    const message = `xDS: no stream to ${o.serverUrl} (${reason}); the policy in force stays, retrying in ${delay} ms`;
    if (this.healthy) o.logger.warn(fields, message);
    else o.logger.debug(fields, message);
    this.healthy = false;
    this.retry = setTimeout(() => this.connect(), delay);
    this.retry.unref();
  }
}

function nack(message: string): { code: number; message: string } {
  return { code: INVALID_ARGUMENT, message };
}

/** A google.protobuf.Struct of strings (protobufjs's built-in struct.proto: camelCase field names). */
function structOf(entries: Readonly<Record<string, string>>): object {
  return { fields: Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, { stringValue: v }])) };
}

/** The channel's credentials: TLS 1.3 only, the files read now. */
function credentialsOf(tls: AdsClientOptions["tls"]): ChannelCredentials {
  if (tls === undefined) return credentials.createInsecure();
  const context = createSecureContext({
    minVersion: "TLSv1.3",
    ...(tls.caFile !== undefined ? { ca: certificatesOf(readFileSync(tls.caFile)) } : {}),
    ...(tls.certFile !== undefined ? { cert: readFileSync(tls.certFile) } : {}),
    ...(tls.keyFile !== undefined ? { key: readFileSync(tls.keyFile) } : {}),
  });
  return credentials.createFromSecureContext(context);
}
