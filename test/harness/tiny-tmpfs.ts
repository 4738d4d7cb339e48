import { execFileSync } from "node:child_process";
import { closeSync, ftruncateSync, fstatSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Test } from "tap";

/*
 * A real small file system that fills up: a tmpfs of a few pages. Mounting one needs root
 * (CAP_SYS_ADMIN); where that is refused, tests that need it are skipped, saying why.
 */

let mountable: boolean | undefined;

/** Whether this process may mount a tmpfs (tried once: root, and the mount itself allowed). */
export function canMountTmpfs(): boolean {
  if (mountable !== undefined) return mountable;
  mountable = false;
  if (process.geteuid?.() !== 0) return false;
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-tmpfs-probe-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stdio: "ignore" });
    execFileSync("umount", [dir], { stdio: "ignore" });
    mountable = true;
  } catch {
    /* refused: no CAP_SYS_ADMIN in this container */
  }
  rmSync(dir, { recursive: true, force: true });
  return mountable;
}

/** Mount a tmpfs of `size` (mount(8) syntax) on a new directory, unmounted and removed at the test's end. */
export function mountTinyTmpfs(t: Test, size = "64k"): string {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-full-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { stdio: "ignore" });
  t.teardown(() => {
    execFileSync("umount", ["-l", dir], { stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Fill `dir`'s file system with `dir/filler` until the kernel says ENOSPC, then give back `freeBytes` (whole pages). */
export function fillUpTo(dir: string, freeBytes: number): void {
  const fd = openSync(path.join(dir, "filler"), "w");
  try {
    const page = Buffer.alloc(4096, 0x55);
    for (;;) {
      try {
        if (writeSync(fd, page) < page.length) break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
        throw err;
      }
    }
    ftruncateSync(fd, Math.max(0, fstatSync(fd).size - freeBytes));
  } finally {
    closeSync(fd);
  }
}
