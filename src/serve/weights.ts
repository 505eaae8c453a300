/**
 * Weight loading for `arbor serve`'s `/update_weights_from_disk`:
 * - a `model_path` is accepted only inside the configured weight roots (`--weights-root`, symlinks
 *   resolved); a path outside them and a path that does not exist get the same 400 and message, so
 *   the endpoint is no oracle for what exists on the machine;
 * - the whole checkpoint is read and validated first (every expected tensor present, no unknown
 *   tensor, shapes equal, every value finite); only then is it copied into the served weights, in one
 *   synchronous step under the server's exclusive weight lock, and the weight version bumped. A
 *   failed load leaves the served model and its version untouched.
 */
import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { readSafetensorsFile, type ParamArena, type Tensor } from '../engine/open.js';
import { BadRequest } from './validate.js';

/** The one message for a path that is outside the roots, missing, or not a checkpoint directory. */
export const NOT_LOADABLE =
  'field "model_path": no loadable checkpoint at that path inside the allowed weight roots (--weights-root)';

/** Resolve `path` to a checkpoint directory inside one of `roots` (real paths), or throw the one 400. */
export function resolveWeightsPath(path: unknown, roots: readonly string[]): { dir: string; file: string } {
  if (typeof path !== 'string' || path.length === 0 || path.length > 4096)
    throw new BadRequest('field "model_path" must be a non-empty string (at most 4096 characters)');
  try {
    if (path.includes('\0')) throw new Error('NUL');
    const dir = realpathSync(resolve(path));
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
    const file = realpathSync(join(dir, 'model.safetensors'));
    if (!statSync(file).isFile()) throw new Error('not a file');
    const inside = (p: string) =>
      roots.some((root) => {
        let r: string;
        try {
          r = realpathSync(resolve(root));
        } catch {
          return false;
        }
        const rel = relative(r, p);
        return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
      });
    if (!inside(dir) || !inside(file)) throw new Error('outside');
    return { dir, file };
  } catch {
    throw new BadRequest(NOT_LOADABLE);
  }
}

/** Validate decoded tensors against the arena's names and shapes and for finite values (400 naming the tensor). */
export function validateTensors(arena: ParamArena, tensors: Record<string, Tensor>, shown: string): void {
  const expected = new Set(arena.specs.map((s) => s.name));
  for (const name of Object.keys(tensors)) {
    if (!expected.has(name))
      throw new BadRequest(
        `field "model_path": ${shown} has tensor ${JSON.stringify(name)}, which the served model does not have (another architecture?)`,
      );
  }
  for (const s of arena.specs) {
    const t = tensors[s.name];
    if (!t) throw new BadRequest(`field "model_path": ${shown} lacks tensor ${s.name}`);
    if (!Array.isArray(t.shape) || t.shape.join(',') !== s.shape.join(','))
      throw new BadRequest(
        `field "model_path": ${shown}: tensor ${s.name} has shape [${t.shape}], the served model has [${s.shape}]`,
      );
    if (t.data.length !== arena.get(s.name).length)
      throw new BadRequest(
        `field "model_path": ${shown}: tensor ${s.name} has ${t.data.length} values, expected ${arena.get(s.name).length}`,
      );
    let bad = 0;
    for (let i = 0; i < t.data.length; i++) if (!Number.isFinite(t.data[i])) bad++;
    if (bad)
      throw new BadRequest(
        `field "model_path": ${shown}: tensor ${s.name} has ${bad} of ${t.data.length} values NaN or infinite; refusing to load it`,
      );
  }
}

/**
 * A two-phase loader over a nano model's parameter arena: `prepare(dir, file)` reads and validates the
 * whole checkpoint (nothing is changed yet) and returns `commit`, which copies every tensor in one
 * synchronous step and returns the new weight version.
 */
export function nanoWeightLoader(model: {
  params: ParamArena;
  weightVersion: number;
}): (dir: string, file: string, asGiven?: string) => Promise<() => number> {
  return async (dir, file, asGiven) => {
    // errors name the path as the client gave it (nothing of the machine's layout beyond that)
    const shown = (asGiven ?? dir).replace(/\/+$/, '');
    let tensors: Record<string, Tensor>;
    try {
      tensors = await readSafetensorsFile(file, `${shown}/model.safetensors`);
    } catch (error) {
      throw new BadRequest(`field "model_path": ${(error as Error)?.message ?? 'cannot read the checkpoint'}`);
    }
    validateTensors(model.params, tensors, `${shown}/model.safetensors`);
    return () => {
      // one synchronous copy: no request can observe a half-loaded model
      for (const s of model.params.specs) model.params.get(s.name).set(tensors[s.name].data);
      model.weightVersion++;
      return model.weightVersion;
    };
  };
}
