/**
 * A plain POSIX ustar archive of regular files, as Tinker serves sampler checkpoints
 * (`adapter_config.json`, `adapter_model.safetensors` and the empty `checkpoint_complete` marker;
 * thinking-machines-lab/tinker@d595dc2 cli/commands/checkpoint.py opens it with tarfile). Names are
 * plain file names (at most 100 bytes); no directories, links or compression.
 */
import { ArborError } from '../../core/errors.js';

const BLOCK = 512;

/** `value` as a zero-padded octal field of `width` bytes (NUL-terminated). */
function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, size: number, mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  if (Buffer.byteLength(name) > 100) throw new ArborError(`tar: file name longer than 100 bytes: ${name}`);
  h.write(name, 0, 'utf8');
  h.write(octal(0o644, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid
  h.write(octal(0, 8), 116, 'ascii'); // gid
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(mtime, 12), 136, 'ascii');
  h.write('        ', 148, 'ascii'); // checksum field counts as spaces
  h.write('0', 156, 'ascii'); // regular file
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return h;
}

/** The tar bytes of `files` (name → contents), in the given order. */
export function tarFiles(
  files: ReadonlyArray<readonly [string, Buffer]>,
  mtime = Math.floor(Date.now() / 1000),
): Buffer {
  const parts: Buffer[] = [];
  for (const [name, data] of files) {
    parts.push(header(name, data.length, mtime), data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(parts);
}
