import type { Logger } from "../../logger.js";
import type { PolicyMetrics } from "../../metrics/policy-metrics.js";
import { PolicyError } from "../errors.js";
import { MAX_POLICY_BYTES, versionOf, type PolicyFile } from "../files.js";
import { compilePolicy, EMPTY_POLICY } from "../policy.js";
import type { Policy } from "../types.js";
import { AdsClient, type AdsClientOptions } from "./ads-client.js";
import { policyFileOf } from "./convert.js";
import { RATE_LIMIT_CONFIG_TYPE, xdsProtos, type AnyMessage } from "./protos.js";

export interface XdsPolicyOptions extends Omit<AdsClientOptions, "apply" | "typeUrl" | "logger"> {
  /** called with each new policy; the owner swaps it in with one assignment */
  readonly onChange: (policy: Policy) => void;
  readonly logger: Logger;
  readonly metrics?: PolicyMetrics;
}

/**
 * The policy taken over xDS (CONFIG_TYPE=GRPC_XDS_SOTW; docs/envoy-gateway.md): every
 * RateLimitConfig resource becomes a policy file (convert.ts) and the set is compiled by the
 * file loader, so a policy from xDS is checked, matched and versioned exactly as one from
 * POLICY_PATH. Its version is the files' content hash, not the server's version_info: members
 * that receive the same resources run the same version, whatever the server numbered it, and
 * the ring's policy agreement (heartbeats, GET /cluster, ringlimit_policy_version_mismatch)
 * compares them as it compares files. A response that does not load is NACKed and the policy
 * in force stays; until a first one loads, the policy is empty (every descriptor matches no
 * rule), which FORCE_START_WITHOUT_INITIAL_CONFIG serves and the default waits out.
 */
export class XdsPolicy {
  private current: Policy = EMPTY_POLICY;
  private loaded = false;
  private readonly client: AdsClient;
  private readonly firstLoad: Promise<void>;
  private resolveFirst!: () => void;

  constructor(private readonly options: XdsPolicyOptions) {
    this.firstLoad = new Promise((resolve) => (this.resolveFirst = resolve));
    this.client = new AdsClient({ ...options, typeUrl: RATE_LIMIT_CONFIG_TYPE, apply: (v, r) => this.apply(v, r) });
  }

  /** the policy in force */
  get policy(): Policy {
    return this.current;
  }

  /** whether a configuration from the server is in force */
  get hasConfig(): boolean {
    return this.loaded;
  }

  /** the management server's version_info of the policy in force ("" before the first) */
  get serverVersion(): string {
    return this.client.version;
  }

  start(): void {
    this.options.metrics?.running(this.current.version);
    this.client.start();
  }

  /** Resolves once a first configuration is in force. */
  firstConfig(): Promise<void> {
    return this.firstLoad;
  }

  stop(): void {
    this.client.stop();
  }

  /** One response's resources: the reason they were refused, or undefined when in force (or unchanged). */
  private apply(serverVersion: string, resources: readonly AnyMessage[]): string | undefined {
    const { logger, metrics } = this.options;
    try {
      const files = filesOf(resources);
      const version = versionOf(files);
      if (this.loaded && version === this.current.version) return undefined;
      const policy = compilePolicy(files);
      const previous = this.current.version;
      this.current = policy;
      metrics?.running(policy.version);
      metrics?.loaded();
      logger.info(
        { version: policy.version, previous, serverVersion, resources: files.length },
        `policy ${policy.version} in force (was ${previous}), xDS version ${serverVersion}`,
      );
      if (!this.loaded) {
        this.loaded = true;
        this.resolveFirst();
      }
      this.options.onChange(policy);
      return undefined;
    } catch (err) {
      metrics?.failed();
      if (!(err instanceof PolicyError)) {
        // A fault here must not end the stream's handler: the response is refused like a bad one.
        logger.error({ err, serverVersion }, `xDS version ${serverVersion} could not be applied, ${this.current.version} stays in force`);
        return "the configuration could not be applied";
      }
      logger.warn(
        { version: this.current.version, serverVersion },
        `xDS version ${serverVersion} refused, ${this.current.version} stays in force: ${err.message}`,
      );
      return err.message;
    }
  }
}

/** The resources as policy files, in name order; a resource that is not a RateLimitConfig refuses the whole response. */
function filesOf(resources: readonly AnyMessage[]): PolicyFile[] {
  const { decodeRateLimitConfig } = xdsProtos();
  const files: PolicyFile[] = [];
  const names = new Set<string>();
  let total = 0;
  resources.forEach((resource, i) => {
    if (resource.type_url !== RATE_LIMIT_CONFIG_TYPE) throw new PolicyError(`xDS resource ${i}`, `is a ${resource.type_url}, not a RateLimitConfig`);
    let decoded: unknown;
    try {
      decoded = decodeRateLimitConfig(resource.value);
    } catch (err) {
      throw new PolicyError(`xDS resource ${i}`, `is not a RateLimitConfig (${(err as Error).message})`);
    }
    const file = policyFileOf(decoded, i);
    if (names.has(file.name)) throw new PolicyError(file.path, "a second resource of this name");
    names.add(file.name);
    total += Buffer.byteLength(file.text);
    if (total > MAX_POLICY_BYTES) throw new PolicyError(file.path, `the resources add up to more than ${MAX_POLICY_BYTES} bytes of policy`);
    files.push(file);
  });
  return files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
