/**
 * Crash-safe file writes: a reader sees the old file or the new one, never a half-written one, after
 * a kill or a power cut (temporary file, fsync, rename, fsync of the directory). A failure (a full
 * disk, a fault injected by a test) leaves the old file untouched, removes the temporary file and
 * throws a DataError naming the file.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
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
  writeFileAtomicWith(file, (write) => write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
}

/**
 * `writeFileAtomic` for content produced in pieces (a multi-gigabyte checkpoint): `produce` calls
 * `write` with each piece in order; nothing of `file` changes until all of it is durable.
 */
export function writeFileAtomicWith(file: string, produce: (write: (bytes: Uint8Array) => void) => void): void {
  const tmp = `${file}.tmp`;
  let producing = false;
  try {
    const fd = openSync(tmp, 'w');
    try {
      producing = true;
      produce((bytes) => {
        for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
      });
      producing = false;
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    faultHook?.(file);
    renameSync(tmp, file);
  } catch (cause) {
    rmSync(tmp, { force: true });
    if (producing && cause instanceof DataError) throw cause; // bad content, not a failed write
    const code = (cause as NodeJS.ErrnoException).code;
    throw new DataError(
      `${file}: cannot write (${code ?? (cause as Error).message}); the previous version, if any, is unchanged`,
      file,
      undefined,
      undefined,
      { cause },
    );
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

/** The bytes of `file`, which must exist: a missing file is a DataError naming it. */
export function readRequiredFile(file: string): Buffer {
  if (!existsSync(file)) throw new DataError(`${file}: no such file`, file);
  return readFileSync(file);
}

/**
 * The JSON object in `file` (a model directory's config.json, tokenizer_config.json, adapter_config.json,
 * ...): a missing required file, malformed JSON or a top level that is not an object is a DataError
 * naming the file; undefined when the file is absent and `optional`. Fields are the readers' to validate.
 */
export function readJsonObject(file: string, optional: true): Record<string, unknown> | undefined;
export function readJsonObject(file: string, optional?: false): Record<string, unknown>;
export function readJsonObject(file: string, optional = false): Record<string, unknown> | undefined {
  if (optional && !existsSync(file)) return undefined;
  return parseJsonObject(readRequiredFile(file).toString('utf8'), file);
}

/** `text`, read from `file`, as a JSON object: malformed JSON or a top level that is not an object is a DataError naming the file. */
export function parseJsonObject(text: string, file: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new DataError(`${file}: invalid JSON (${(cause as Error).message})`, file, undefined, undefined, { cause });
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new DataError(`${file}: expected a JSON object at the top level`, file);
  }
  return value as Record<string, unknown>;
}
