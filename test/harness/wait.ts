/*
 * Waiting in tests for what another process or a later event-loop turn brings about: poll
 * until it holds, within a bound. The bound is generous (two shared cores run several suites
 * at once) and makes no speed claim: the wait ends as soon as the condition holds.
 */

/** Poll `check` every `everyMs` until it holds or `timeoutMs` has passed; whether it held. The caller's assertion judges. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** As eventually(), for a wait the test cannot go on without: one that runs out throws, naming `what`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 50): Promise<true> {
  if (await eventually(check, timeoutMs, everyMs)) return true;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
