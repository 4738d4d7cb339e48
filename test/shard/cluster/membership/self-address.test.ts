import t from "tap";
import { findSelf, splitHostPort } from "../../../../src/shard/cluster/membership/self-address.js";

t.test("self is found by bound address and port, or by NODE_ID", async (t) => {
  const members = ["127.0.0.1:7000", "127.0.0.2:7000", "127.0.0.3:7000"];
  t.equal(findSelf(members, "127.0.0.2", 7000, undefined), "127.0.0.2:7000", "a specific bind address matches only itself");
  t.equal(findSelf(members, "0.0.0.0", 7000, undefined), "127.0.0.1:7000", "a wildcard bind matches this machine's addresses");
  t.equal(findSelf(members, "0.0.0.0", 7001, undefined), undefined, "another port is another node");
  t.equal(findSelf(["node-a:1", "node-b:1"], "0.0.0.0", 9, "node-b:1"), "node-b:1", "NODE_ID names the entry");
  t.same(splitHostPort("[::1]:7000"), { host: "::1", port: 7000 });
});
