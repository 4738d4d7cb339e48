import type { EventEmitter } from "node:events";

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
    await sleep(everyMs);
  }
}

/** As eventually(), for a wait the test cannot go on without: one that runs out throws, naming `what`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 50): Promise<true> {
  if (await eventually(check, timeoutMs, everyMs)) return true;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** A pause of `ms`: for a test that needs time to pass (a window to age), not to wait for an event (use eventually). */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolve on `event`, reject after `ms`, so a broken test fails instead of hanging. */
export function waitEvent<T = unknown>(em: EventEmitter, event: string, ms = 5_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      em.off(event, on);
      reject(new Error(`no '${event}' within ${ms} ms`));
    }, ms);
    const on = (v: T): void => {
      clearTimeout(timer);
      resolve(v);
    };
    em.once(event, on);
  });
}

/** Race `p` against a bound: true if it settled within `ms`. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)));
  try {
    return await Promise.race([p.then(() => true), t]);
  } finally {
    clearTimeout(timer);
  }
}
