import { PolicyError } from "./errors.js";
import { GlobIndex, GroupTable } from "./glob.js";
import { BRAND, revive } from "./worker/transfer.js";
import { readPolicyFiles, versionOf, type PolicyFile } from "./files.js";
import { OverrideIndex } from "./override-index.js";
import { compileOverrides, refuseTies, type OverrideEntry } from "./overrides.js";
import { compileDomain } from "./rls-loader.js";
import { matchDescriptors, type RlsDomain } from "./rls-domain.js";
import type { Override, Policy, RlsDescriptorEntries, RlsMatch } from "./types.js";
import { NodeBudget, readYamlDocuments } from "./yaml-reader.js";

/** The version of the policy in force when POLICY_PATH is unset. */
export const NO_POLICY_VERSION = "none";

/**
 * A loaded policy: its domains by name and its override index. Immutable; a reload builds
 * another and the owner swaps it in one assignment.
 */
class LoadedPolicy implements Policy {
  /** what this object is once copied to another thread (transfer.ts) */
  readonly [BRAND] = "LoadedPolicy";
  constructor(
    readonly version: string,
    private readonly domains: ReadonlyMap<string, RlsDomain>,
    private readonly overrides: OverrideIndex,
  ) {
    this.overrideCount = overrides.size;
    Object.freeze(this);
  }

  readonly overrideCount: number;

  /** how many RLS domains and override entries it holds (for logs) */
  get counts(): { domains: number; overrides: number } {
    return { domains: this.domains.size, overrides: this.overrides.size };
  }

  matchRequest(domain: string, descriptors: readonly RlsDescriptorEntries[]): (RlsMatch | undefined)[] {
    return matchDescriptors(this.domains.get(domain), descriptors);
  }

  matchOverride(namespace: string, identifier: string): Override | undefined {
    return this.overrides.match(namespace, identifier);
  }
}

/** A policy compiled on another thread and copied here (structured clone): its classes given back, in place. */
export function revivePolicy(copy: unknown): Policy {
  revive(copy, { LoadedPolicy, GlobIndex, GroupTable, OverrideIndex });
  if (!(copy instanceof LoadedPolicy)) throw new Error("not a compiled policy");
  return copy;
}

/** No rules, no overrides: what a node runs without POLICY_PATH. Version "none". */
export const EMPTY_POLICY: Policy = new LoadedPolicy(NO_POLICY_VERSION, new Map(), new OverrideIndex([]));

/** The policy at POLICY_PATH (a file or a folder of them); throws PolicyError naming the file and the problem. */
export function loadPolicy(policyPath: string): Policy {
  return compilePolicy(readPolicyFiles(policyPath));
}

/** What is wrong with the policy at POLICY_PATH, as one line; undefined when it loads. */
export function problemOfPolicy(policyPath: string): string | undefined {
  try {
    loadPolicy(policyPath);
    return undefined;
  } catch (err) {
    if (err instanceof PolicyError) return err.message;
    throw err;
  }
}

/**
 * The policy of files already read. A document holds either an RLS domain (`domain`,
 * `descriptors`: envoyproxy/ratelimit's format) or `overrides`, never both; a file may
 * hold several documents separated by `---`. A folder with no policy file gives a policy
 * with no rules, versioned like any other (the hash of nothing).
 */
export function compilePolicy(files: readonly PolicyFile[]): Policy {
  const domains = new Map<string, RlsDomain>();
  const overrides: OverrideEntry[] = [];
  // one budget for every file: the bounds are the policy's
  const budget = new NodeBudget();
  for (const file of files) {
    const documents = readYamlDocuments(file.path, file.text, budget);
    let nonEmpty = 0;
    let overrideCount = 0;
    for (const reader of documents) {
      const root = reader.root;
      if (root === null) continue;
      nonEmpty++;
      const top = reader.map(root, "the document", ["domain", "descriptors", "overrides"]);
      if (top.has("overrides")) {
        if (top.has("domain") || top.has("descriptors")) {
          reader.fail(root, "a document holds either domain and descriptors, or overrides: separate them with ---");
        }
        const entries = compileOverrides(reader, top.get("overrides")!, file.name, overrideCount);
        overrideCount += entries.length;
        overrides.push(...entries);
        continue;
      }
      const domain = compileDomain(reader, top);
      if (domains.has(domain.name)) throw new PolicyError(file.path, `duplicate domain '${domain.name}' in config file`);
      domains.set(domain.name, domain);
    }
    if (nonEmpty === 0) throw new PolicyError(file.path, "config file cannot have empty domain (the file holds no domain and no overrides)");
  }
  refuseTies(overrides);
  return new LoadedPolicy(versionOf(files), domains, new OverrideIndex(overrides));
}
