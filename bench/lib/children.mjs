// Child processes of the bench: every one is started in its own process group
// (detached) and remembered, so that the bench can kill whole groups at the end,
// on an error, or on SIGINT/SIGTERM — and never anything it did not start.
import { spawn } from 'node:child_process'

const live = new Map() // pgid -> { name, child }
const TAIL = 4096

/**
 * Start a command in a new process group. Keeps the last few KiB of its output
 * (to explain a failed start) and resolves `exited` when it has ended and all of its
 * output has been read. `exitCode` is set as soon as it exits.
 */
export function spawnTracked(name, cmd, args, { env, cwd, stdout = 'tail' } = {}) {
  const child = spawn(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const rec = { name, child, pid: child.pid, out: '', err: '', exitCode: undefined }
  if (child.pid === undefined) {
    rec.exited = new Promise((resolve) =>
      child.once('error', (e) => {
        rec.err = String(e)
        rec.exitCode = -1
        resolve(-1)
      }),
    )
    return rec
  }
  live.set(child.pid, rec)
  child.stdout.on('data', (d) => {
    rec.out = (rec.out + d).slice(stdout === 'all' ? 0 : -TAIL)
  })
  child.stderr.on('data', (d) => {
    rec.err = (rec.err + d).slice(-TAIL)
  })
  // 'close', not 'exit': 'exit' can come before the last of the child's output has been
  // read from its pipes, and a caller that reads `out` then (wrk's result line) loses it.
  // 'close' comes once the process has exited and both pipes are drained.
  rec.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      rec.exitCode = code ?? signal
    })
    child.once('close', (code, signal) => {
      rec.exitCode = code ?? signal
      live.delete(child.pid)
      resolve(rec.exitCode)
    })
    child.once('error', (e) => {
      rec.err += String(e)
      rec.exitCode = -1
      live.delete(child.pid)
      resolve(-1)
    })
  })
  return rec
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal)
  } catch {
    /* already gone */
  }
}

/** SIGTERM the group, then SIGKILL it if it has not exited within graceMs. */
export async function stopTracked(rec, graceMs = 1500) {
  if (rec.pid === undefined) return
  if (rec.exitCode !== undefined) {
    // Exited: its group may live on and hold the pipes open; make sure, then wait for them.
    signalGroup(rec.pid, 'SIGKILL')
    return void (await rec.exited)
  }
  signalGroup(rec.pid, 'SIGTERM')
  let timer
  const killed = new Promise((resolve) => {
    timer = setTimeout(() => {
      signalGroup(rec.pid, 'SIGKILL')
      resolve()
    }, graceMs)
  })
  await Promise.race([rec.exited, killed])
  clearTimeout(timer)
  // The leader may be gone while others of its group live on: make sure.
  signalGroup(rec.pid, 'SIGKILL')
  await rec.exited
}

/** Synchronous: usable from an 'exit' handler. */
export function killAllSync() {
  for (const pid of live.keys()) signalGroup(pid, 'SIGKILL')
  live.clear()
}

let installed = false
/** Kill every tracked group on exit, SIGINT, SIGTERM, or an uncaught error. */
export function installCleanup(onSignal = () => {}) {
  if (installed) return
  installed = true
  process.on('exit', killAllSync)
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      process.stderr.write(`\nbench: ${sig}, stopping ${live.size} child process group(s)\n`)
      killAllSync()
      try {
        onSignal()
      } catch {
        /* best effort */
      }
      process.exit(130)
    })
  }
}

export function liveCount() {
  return live.size
}
