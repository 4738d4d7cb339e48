/** The policy over xDS (CONFIG_TYPE=GRPC_XDS_SOTW; docs/envoy-gateway.md). */
export { XdsPolicy, type XdsPolicyOptions } from "./xds-policy.js";
export { xdsClientOptionsOf } from "./settings.js";
export { ADS_PROTO, RATE_LIMIT_CONFIG_TYPE, RLS_CONF_PROTO, XDS_PROTO_DIR } from "./protos.js";
