import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { generate } from "selfsigned";

export interface CertFiles {
  /** PEM certificate (self-signed, so it is also its own CA) */
  cert: Buffer;
  /** PEM private key */
  key: Buffer;
  certFile: string;
  keyFile: string;
}

interface Teardown {
  teardown(fn: () => void): void;
}

/**
 * A throwaway self-signed certificate made in JavaScript (no openssl CLI), written to a
 * fresh temp folder that the test's teardown removes, key included.
 * `ip` goes into subjectAltName, so HTTPS clients that check names accept it.
 */
export async function selfSignedCert(t: Teardown, options: { commonName: string; ip?: string }): Promise<CertFiles> {
  const pems = await generate([{ name: "commonName", value: options.commonName }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate: new Date(Date.now() + 24 * 3600_000),
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true, clientAuth: true },
      ...(options.ip !== undefined ? [{ name: "subjectAltName" as const, altNames: [{ type: 7 as const, ip: options.ip }] }] : []),
    ],
  });
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-cert-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const certFile = path.join(dir, "cert.pem");
  const keyFile = path.join(dir, "key.pem");
  writeFileSync(certFile, pems.cert);
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  return { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private), certFile, keyFile };
}
