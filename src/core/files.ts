/**
 * Crash-safe file writes: a reader sees the old file or the new one, never a half-written one, after
 * a kill or a power cut (temporary file, fsync, rename, fsync of the directory). A failure (a full
 * disk, a fault injected by a test) leaves the old file untouched, removes the temporary file and
 * throws a DataError naming the file.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { DataError } from './errors.js';

/** Called with the target path once the temporary file is durable, before the rename; throw to simulate a fault. */
export type WriteFaultHook = (file: string) => void;
let faultHook: WriteFaultHook | undefined;

/** Fault injection for tests (undefined removes the hook). */
export function setWriteFaultHook(hook: WriteFaultHook | undefined): void {
  faultHook = hook;
}

/** Write `data` to `file.tmp`, fsync it, rename it over `file`, fsync the directory. */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const tmp = `${file}.tmp`;
  try {
    const fd = openSync(tmp, 'w');
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    faultHook?.(file);
    renameSync(tmp, file);
  } catch (cause) {
    rmSync(tmp, { force: true });
    const code = (cause as NodeJS.ErrnoException).code;
    throw new DataError(`${file}: cannot write (${code ?? (cause as Error).message}); the previous version, if any, is unchanged`, file, undefined, undefined, { cause });
  }
  fsyncDirectory(dirname(file));
}

/** fsync a directory so a rename in it survives a power cut (best effort: some filesystems refuse). */
export function fsyncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // directories cannot be fsynced everywhere (e.g. some network filesystems); the rename still happened
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
