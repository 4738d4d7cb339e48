/**
 * bearerToken and ApiKeyVerifier: the scheme rule (RFC 9110, case-insensitive), plaintext
 * and hashed keys, the first/middle/last configured key all found (no early exit that
 * skips any), and many wrong keys refused.
 */
import { createHash } from "node:crypto";
import t from "tap";
import { ApiKeyVerifier, bearerToken, generateApiKey, sha256 } from "../../src/auth/api-keys.js";
import { show } from "../harness/contract.js";
import { newApiKey } from "../harness/http-client.js";

const hex = (s: string) => createHash("sha256").update(s).digest("hex");

t.test("bearerToken", async (t) => {
  const cases: [header: string, token: string | undefined][] = [
    ["Bearer abc", "abc"],
    ["bearer abc", "abc"],
    ["BEARER abc", "abc"],
    ["BeArEr abc", "abc"],
    ["Bearer   abc", "abc"], // several spaces
    ["Bearer a", "a"],
    ["Bearer svc_sk_x-y_z", "svc_sk_x-y_z"],
    ["", undefined],
    ["Bearer", undefined],
    ["Bearer ", undefined],
    ["Bearer    ", undefined],
    ["Bearerabc", undefined],
    ["Bearer\tabc", undefined],
    ["Basic abc", undefined],
    ["Token abc", undefined],
    [" Bearer abc", undefined],
    ["Bearer a b", undefined],
    ["Bearer abc ", undefined],
    ["Bearers abc", undefined],
    ["Bear abc", undefined],
    ["Bearer: abc", undefined],
    ["abc", undefined],
  ];
  for (const [header, token] of cases) t.equal(bearerToken(header), token, show(header));
});

t.test("plaintext keys", async (t) => {
  const keys = [newApiKey(), newApiKey(), newApiKey()];
  const v = new ApiKeyVerifier(keys, []);
  t.equal(v.size, 3);
  keys.forEach((k, i) => {
    t.equal(v.verifyHeader(`Bearer ${k}`), true, `key #${i} (first, middle, last) accepted`);
    t.equal(v.verifyHeader(`bearer ${k}`), true, `key #${i}, lower-case scheme`);
    t.equal(v.verifyHeader(k), false, `key #${i} without a scheme`);
    t.equal(v.verifyHeader(`Basic ${k}`), false, `key #${i} with Basic`);
  });
});

t.test("hashed keys, in any hex case, alongside plaintext ones", async (t) => {
  const hashedKey = newApiKey();
  const upperKey = newApiKey();
  const plain = newApiKey();
  const v = new ApiKeyVerifier([plain], [hex(hashedKey), hex(upperKey).toUpperCase()]);
  t.equal(v.size, 3);
  t.equal(v.verifyHeader(`Bearer ${hashedKey}`), true, "key given by its hash");
  t.equal(v.verifyHeader(`Bearer ${upperKey}`), true, "hash in upper-case hex");
  t.equal(v.verifyHeader(`Bearer ${plain}`), true, "plaintext key");
  t.equal(v.verifyHeader(`Bearer ${hex(hashedKey)}`), false, "the hash is not itself a key");
  t.equal(sha256("abc").toString("hex"), hex("abc"));
});

t.test("many wrong keys are refused", async (t) => {
  const key = newApiKey();
  const v = new ApiKeyVerifier([key], [hex(newApiKey())]);
  let accepted = 0;
  const wrong: string[] = [];
  for (let i = 0; i < key.length; i++) {
    // one character changed at each position, one deleted, one inserted
    const c = key[i] === "A" ? "B" : "A";
    wrong.push(key.slice(0, i) + c + key.slice(i + 1), key.slice(0, i) + key.slice(i + 1), key.slice(0, i) + "x" + key.slice(i));
  }
  wrong.push(key + "x", key.slice(0, -1), key.toUpperCase(), key.toLowerCase(), key + key, "svc_sk_", "", " ", key.slice(7));
  for (let i = 0; i < 1000; i++) wrong.push(newApiKey());
  for (const w of wrong) if (w !== key && v.verifyHeader(`Bearer ${w}`)) accepted++;
  t.equal(accepted, 0, `${wrong.length} wrong keys, none accepted`);
  t.equal(v.verifyHeader(`Bearer ${key}`), true, "and the right one still is");
});

t.test("no keys: nothing is accepted", async (t) => {
  const v = new ApiKeyVerifier([], []);
  t.equal(v.size, 0);
  t.equal(v.verifyHeader(`Bearer ${newApiKey()}`), false);
  t.equal(v.verifyHeader(""), false);
});

t.test("a malformed key hash is refused when the verifier is built, not on each request", async (t) => {
  for (const bad of ["", "zz", "ab".repeat(31), "ab".repeat(33), "g".repeat(64)]) {
    t.throws(() => new ApiKeyVerifier([], [bad]), RangeError, show(bad));
  }
  t.doesNotThrow(() => new ApiKeyVerifier([], ["Ab".repeat(32)]));
});

t.test("generateApiKey", async (t) => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const { key, sha256: digest } = generateApiKey();
    t.match(key, /^svc_sk_[A-Za-z0-9_-]{43}$/, "svc_sk_ + 43 base64url characters (256 bits)");
    t.equal(digest, hex(key), "its SHA-256");
    seen.add(key);
    const v = new ApiKeyVerifier([], [digest]);
    if (!v.verifyHeader(`Bearer ${key}`)) t.fail("a generated key is not accepted through its hash");
  }
  t.equal(seen.size, 200, "all different");
});
