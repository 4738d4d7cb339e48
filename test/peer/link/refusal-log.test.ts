import t from "tap";
import { PeerRefusals } from "../../../src/peer/link/refusal-log.js";
import { HandshakeError } from "../../../src/peer/link/handshake.js";

function recorder() {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  const log = {
    debug: () => {},
    info: (fields: object, msg: string) => lines.push({ fields: fields as Record<string, unknown>, msg }),
    warn: (fields: object, msg: string) => lines.push({ fields: fields as Record<string, unknown>, msg }),
  };
  return { lines, log };
}

t.test("a refused handshake: one line when first seen, then at most one per interval, with the attempts since", (t) => {
  const { lines, log } = recorder();
  let now = 0;
  const changes: (string | undefined)[] = [];
  const r = new PeerRefusals(log, "127.0.0.1:7001", 10_000, () => now);
  r.onChange = () => changes.push(r.reason);
  t.equal(r.noted(new Error("not a handshake")), false, "other errors are the caller's to log");
  for (let i = 0; i < 20; i++) {
    t.equal(r.noted(new HandshakeError("bad_proof", "server proof does not match")), true);
    now += 1000; // one back-off step at the cap
  }
  // Attempts at 0..19 s: lines at 0, 10 s (an interval later).
  t.equal(lines.length, 2, "two lines for 20 attempts over 20 s");
  t.match(lines[0]!.msg, /CLUSTER_SECRET/, "the line names the setting");
  t.equal(lines[1]!.fields.attempts, 10, "the repeat counts the attempts since the last line");
  t.notOk("err" in lines[0]!.fields, "no error object, so no stack");
  t.equal(r.reason, "bad_proof", "readiness reads the reason");
  r.noted(new HandshakeError("wrong_node", "client dialed another node"));
  t.equal(lines.length, 3, "a new reason is said at once");
  r.accepted();
  t.equal(r.reason, undefined, "cleared once a handshake succeeds");
  t.match(lines[3]!.msg, /accepted again/);
  t.same(changes, ["bad_proof", "wrong_node", undefined], "told on each change of reason, not per attempt");
  t.end();
});
