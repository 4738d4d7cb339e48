import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import type { ApiKeyVerifier } from "../../auth/api-keys.js";
import { ENVELOPE, envelopeHead, errorBody, jsonString, RING_VERSION_HEADER } from "../envelope.js";
import { endWithError, Errors } from "../errors.js";
import type { IdGenerator } from "../ids.js";
import type { SoftwareFacts } from "../../peer/index.js";

export interface ClusterMemberView {
  readonly id: string;
  readonly url: string | null;
}

/** What GET /cluster tells clients; `version` changes whenever the members or their URLs do. */
export interface RingDirectory {
  readonly self: string;
  readonly version: string;
  readonly members: readonly ClusterMemberView[];
  /** the policy version `member` runs (docs/policy.md); null until its heartbeat told it */
  policyVersionOf(member: string): string | null;
  /** this node's build and the peer protocol versions it speaks and its ring runs at (docs/operations.md, Rolling upgrades) */
  software?: () => SoftwareFacts;
}

/**
 * GET /cluster: the members clients route to (docs/client.md), behind the same bearer keys
 * as the POST endpoints. Not a decision: answered in the handler, nothing in flight.
 */
export function clusterEndpoint(verifier: ApiKeyVerifier, ids: IdGenerator, clock: () => number, directory: RingDirectory) {
  return (res: HttpResponse, req: HttpRequest): void => {
    if (!verifier.verifyHeader(req.getHeader("authorization"))) {
      endWithError(res, Errors.unauthorized, errorBody(ids.error(), clock(), Errors.unauthorized));
      return;
    }
    const body = clusterBody(
      ids.ok(),
      clock(),
      directory.version,
      directory.self,
      directory.members,
      (m) => directory.policyVersionOf(m),
      directory.software?.(),
    );
    res.writeStatus("200 OK").writeHeader(RING_VERSION_HEADER, directory.version).writeHeader("Content-Type", "application/json").end(body);
  };
}

/** GET /cluster (cold path: a client asks once per ring change). */
export function clusterBody(
  id: string,
  timestamp: number,
  ringVersion: string,
  self: string,
  members: readonly ClusterMemberView[],
  policyVersionOf: (member: string) => string | null = () => null,
  software?: SoftwareFacts,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.cluster) +
    (software === undefined ? "" : '"build":' + jsonString(software.build) + ',"protocol":' + JSON.stringify(software.protocol) + ",") +
    '"ring_version":' +
    jsonString(ringVersion) +
    ',"self":' +
    jsonString(self) +
    ',"members":' +
    JSON.stringify(members.map((m) => ({ id: m.id, url: m.url, policy_version: policyVersionOf(m.id) }))) +
    "}}"
  );
}
