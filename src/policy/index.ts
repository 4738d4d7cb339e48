/** The policy layer (docs/policy.md): RLS rules and POST /limit overrides from POLICY_PATH. */
export type { Override, Policy, RlsDescriptorEntries, RlsMatch, RlsRule, RlsUnit } from "./types.js";
export { PolicyError } from "./errors.js";
export { EMPTY_POLICY, NO_POLICY_VERSION, compilePolicy, loadPolicy, problemOfPolicy } from "./policy.js";
export { MAX_POLICY_BYTES, MAX_POLICY_FILE_BYTES, readPolicyFiles, versionOf, type PolicyFile } from "./files.js";
export { UNIT_SECONDS } from "./rls-loader.js";
export { PolicyWatcher, POLICY_CHECK_INTERVAL_MS, type PolicyWatcherOptions, type ReloadResult } from "./watcher.js";
