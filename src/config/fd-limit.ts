import { readFileSync } from "node:fs";

/** The process's soft limit of open files (Linux: /proc/self/limits); undefined when unknown or unlimited. */
export function fileDescriptorLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "latin1"));
    return line === null ? undefined : Number(line[1]);
  } catch {
    return undefined;
  }
}
