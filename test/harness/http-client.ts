import { randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
// Tests generate their own self-signed certificates.
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs?: number;
  /** default: a shared keep-alive agent; `false`: a new connection for this request */
  agent?: http.Agent | false;
}

/** A plain HTTP(S) request with nothing added but what the caller sets (and Content-Length). */
export function request(url: string, options: RequestOptions = {}): Promise<Reply> {
  const u = new URL(url);
  const secure = u.protocol === "https:";
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: options.method ?? "GET",
        headers: options.headers ?? {},
        agent: options.agent ?? (secure ? httpsAgent : httpAgent),
        ...(secure ? { rejectUnauthorized: false } : {}),
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    if (options.body !== undefined) req.end(options.body);
    else req.end();
  });
}

export const TEST_KEY = "svc_sk_" + "t3stK3yF0rR1ngl1m1tT3sts0nlyXXXXXXXXXX";

/** The Authorization header of TEST_KEY. */
export const AUTH_HEADER = { authorization: `Bearer ${TEST_KEY}` };

/** A fresh API key in the service's format (not one a node is configured with). */
export const newApiKey = (): string => "svc_sk_" + randomBytes(32).toString("base64url");

/** POST /limit with a valid key and JSON content type unless overridden. */
export function limit(baseUrl: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  return request(baseUrl + "/limit", {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

export function closeAgents(): void {
  httpAgent.destroy();
  httpsAgent.destroy();
}

/** POST to any path (e.g. /limit/batch, /limit/reset) with a valid key and JSON content type. */
export function post(baseUrl: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  return request(baseUrl + path, {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
