/**
 * The directory a sandbox run's private temp dir is made in (os.tmpdir(), i.e. $TMPDIR). With a per-run
 * uid (setpriv), that uid must be able to pass through every directory above its own: one that other
 * users cannot search (a per-user TMPDIR of mode 0700, as some systems set) made every program fail with
 * "Permission denied" on its own files, which a code reward would have scored as a wrong answer. This
 * refuses such a base instead, naming the directory.
 */
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { SandboxError } from '../../core/errors.js';

/** The first of `dir` and its ancestors that other users cannot search (no o+x), with its mode; else null. */
export async function unsearchableAncestor(dir: string): Promise<{ path: string; mode: number } | null> {
  for (let path = resolve(dir); ; path = dirname(path)) {
    const mode = (await stat(path)).mode & 0o7777;
    if ((mode & 0o001) === 0) return { path, mode };
    if (dirname(path) === path) return null;
  }
}

/** os.tmpdir(), after checking a per-run uid can reach directories made in it (SandboxError if not). */
export async function sandboxTempBase(perRunUid: boolean): Promise<string> {
  const base = tmpdir();
  if (!perRunUid) return base;
  const blocked = await unsearchableAncestor(base);
  if (blocked) {
    throw new SandboxError(
      `sandbox setup failed: the per-run user cannot reach the temp directory ${base}: ${blocked.path} ` +
        `(mode ${blocked.mode.toString(8).padStart(4, '0')}) is not searchable by other users; ` +
        'point TMPDIR at a directory such as /tmp',
    );
  }
  return base;
}
