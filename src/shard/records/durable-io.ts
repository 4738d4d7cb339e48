import { randomBytes } from "node:crypto";
import { constants as fsc } from "node:fs";
import { open, rename, unlink, type FileHandle } from "node:fs/promises";
import path from "node:path";

/*
 * Writing to STATE_DIR so that what is on disk is what was meant: every byte of a write
 * checked (a full disk makes write(2) return short, not fail), data and directory fsynced.
 */

/**
 * Write buf[0, length) at `position`, all of it: write(2) may write less than asked (a file
 * system that fills up mid-write does), and the rest is retried until the kernel says why
 * not (ENOSPC, EIO, EDQUOT). A write of 0 bytes is an error too.
 */
export async function writeFully(fh: FileHandle, buf: Buffer, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesWritten } = await fh.write(buf, done, length - done, position + done);
    if (bytesWritten <= 0) throw Object.assign(new Error(`short write: ${done} of ${length} bytes written`), { code: "EIO" });
    done += bytesWritten;
  }
}

/** fsync a directory: a rename or a new file in it survives a crash only then. */
export async function syncDirectory(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Put `data` at `file` durably and only whole: a temporary file of a unique name beside it
 * (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: a link planted there is never followed), written
 * in full, fsynced, renamed over `file`, the directory fsynced.
 */
export async function writeFileDurably(file: string, data: Buffer): Promise<void> {
  const tmp = `${file}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
  const fh = await open(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
  try {
    try {
      await writeFully(fh, data, data.length, 0);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await syncDirectory(path.dirname(file));
}
