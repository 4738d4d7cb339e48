/**
 * The client-facing directory: a ring version that depends only on the members and their
 * URLs (not their order), and peer-supplied URLs checked like callers' data.
 */
import t from "tap";
import { Directory, ringVersionOf } from "../../../../src/shard/cluster/membership/directory.js";
import { isAdvertiseUrl } from "../../../../src/config/advertise-url.js";
import { defaultAdvertiseUrl } from "../../../../src/shard/cluster/membership/self-address.js";

t.test("ring version: stable across order, changes with members and URLs", async (t) => {
  const a = { id: "10.0.0.1:9080", url: "http://10.0.0.1:8080" };
  const b = { id: "10.0.0.2:9080", url: "http://10.0.0.2:8080" };
  const v = ringVersionOf([a, b]);
  t.match(v, /^[0-9a-f]{16}$/);
  t.equal(ringVersionOf([b, a]), v);
  t.not(ringVersionOf([a]), v);
  t.not(ringVersionOf([a, { ...b, url: null }]), v);
  t.not(ringVersionOf([a, { ...b, url: "http://10.0.0.2:8081" }]), v);
});

t.test("Directory follows the ring and the URLs members advertise", async (t) => {
  const d = new Directory("a:1", "http://a:8080");
  const v1 = d.version;
  t.same(d.members, [{ id: "a:1", url: "http://a:8080" }]);
  d.setRing(["a:1", "b:1"]);
  t.same(d.members, [
    { id: "a:1", url: "http://a:8080" },
    { id: "b:1", url: null },
  ]);
  const v2 = d.version;
  t.not(v2, v1);
  t.ok(d.setUrl("b:1", "http://b:8080"));
  t.equal(d.members[1]!.url, "http://b:8080");
  t.not(d.version, v2);
  const v3 = d.version;
  t.notOk(d.setUrl("a:1", "http://evil:1"), "nobody else sets this node's URL");
  t.notOk(d.setUrl("b:1", "ftp://b"), "only http(s)");
  t.equal(d.version, v3);
  d.setRing(["a:1"]);
  t.equal(d.version, v1, "back to the same members: back to the same version");
  t.same(await d.answerAdvertise(Buffer.from("http://c:8080"), "c:1"), Buffer.from("http://a:8080"));
  await t.rejects(d.answerAdvertise(Buffer.from("not a url"), "c:1"));
});

t.test("advertise URLs: absolute http(s), no credentials, query or fragment, bounded", async (t) => {
  for (const ok of ["http://10.0.0.1:8080", "https://ringlimit.svc:443/", "http://[::1]:8080", "https://gw.example/ringlimit"]) t.ok(isAdvertiseUrl(ok), ok);
  for (const bad of ["", "10.0.0.1:8080", "ftp://x", "http://u:p@x", "http://x/?a=1", "http://x/#f", "http://x/" + "a".repeat(3000)])
    t.notOk(isAdvertiseUrl(bad), bad);
});

t.test("default advertise URL", async (t) => {
  t.equal(defaultAdvertiseUrl({ tls: false, host: "127.0.0.2", port: 8080 }), "http://127.0.0.2:8080");
  t.equal(defaultAdvertiseUrl({ tls: true, host: "::1", port: 8443 }), "https://[::1]:8443");
  t.equal(
    defaultAdvertiseUrl({ tls: false, host: "0.0.0.0", port: 8080, ringName: "10.1.2.3:9080" }),
    "http://10.1.2.3:8080",
    "a wildcard takes the ring name's host",
  );
  t.match(defaultAdvertiseUrl({ tls: false, host: "0.0.0.0", port: 8080, ringName: "0.0.0.0:9080" }), /^http:\/\/\d+\.\d+\.\d+\.\d+:8080$/);
});
