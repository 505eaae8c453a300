/**
 * Hugging Face weights → the model's parameter arena: `model.safetensors`, or the shards listed by
 * `model.safetensors.index.json` (`weight_map`: tensor name → shard file), in F32, F16 or BF16, read
 * one tensor at a time straight into the arena (converted to float32). Every tensor the model expects
 * must be there with its shape; a tied model may omit `lm_head.weight`; tensors the model does not have
 * (another architecture) are refused, except rotary buffers some exports carry. Every error names the
 * file and the tensor; nothing is half-loaded into a served model (callers load into a fresh arena).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import type { ParamArena } from '../model/params.js';
import { SafetensorsFile, type FloatDtype } from './safetensors.js';

/** Tensors some exports carry that are not parameters (ignored). */
const IGNORED = /\.rotary_emb\.inv_freq$/;

/** The weight files of a model directory and which tensors each holds. */
export function weightFiles(dir: string): { files: string[]; index?: string } {
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    let map: unknown;
    try {
      map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map?: unknown }).weight_map;
    } catch (cause) {
      throw new DataError(`${index}: not valid JSON (${(cause as Error).message})`, index, undefined, undefined, {
        cause,
      });
    }
    if (
      typeof map !== 'object' ||
      map === null ||
      Array.isArray(map) ||
      !Object.values(map).every((f) => typeof f === 'string' && !f.includes('/'))
    ) {
      throw new DataError(
        `${index}: weight_map must map tensor names to shard file names`,
        index,
        undefined,
        'weight_map',
      );
    }
    const files = [...new Set(Object.values(map as Record<string, string>))].sort();
    for (const f of files)
      if (!existsSync(join(dir, f)))
        throw new DataError(
          `${index}: shard ${f} listed in weight_map is missing from ${dir}`,
          index,
          undefined,
          'weight_map',
        );
    return { files: files.map((f) => join(dir, f)), index };
  }
  const single = join(dir, 'model.safetensors');
  if (!existsSync(single)) throw new DataError(`${dir}: no model.safetensors or model.safetensors.index.json`, single);
  return { files: [single] };
}

/**
 * Read every parameter of `arena` from the weight files of `dir`; `tied` lets `lm_head.weight` be absent.
 * Returns the stored dtypes seen. Values must be finite.
 */
export function loadHfWeights(
  arena: ParamArena,
  dir: string,
  options: { tiedHead?: string; embed?: string } = {},
): { dtypes: FloatDtype[] } {
  const { files } = weightFiles(dir);
  const opened: SafetensorsFile[] = [];
  try {
    const where = new Map<string, SafetensorsFile>();
    for (const f of files) {
      const st = SafetensorsFile.open(f);
      opened.push(st);
      for (const name of st.header.entries.keys()) {
        if (where.has(name))
          throw new DataError(`${f}: tensor ${name} is also in ${where.get(name)!.file}`, f, undefined, name);
        where.set(name, st);
      }
    }
    const expected = new Set(arena.specs.map((s) => s.name));
    for (const [name, st] of where) {
      if (expected.has(name) || IGNORED.test(name) || name === options.tiedHead) continue;
      throw new DataError(
        `${st.file}: tensor ${name} is not a parameter of this model (a config.json for another architecture, or extra layers?)`,
        st.file,
        undefined,
        name,
      );
    }
    const dtypes = new Set<FloatDtype>();
    for (const spec of arena.specs) {
      const st = where.get(spec.name);
      if (!st)
        throw new DataError(
          `${files.join(', ')}: missing tensor ${spec.name} (shape [${spec.shape}])`,
          files[0],
          undefined,
          spec.name,
        );
      const entry = st.entry(spec.name)!;
      if (entry.shape.join(',') !== spec.shape.join(',')) {
        throw new DataError(
          `${st.file}: tensor ${spec.name} has shape [${entry.shape}], config.json implies [${spec.shape}]`,
          st.file,
          undefined,
          spec.name,
        );
      }
      const view = arena.get(spec.name);
      st.read(spec.name, view);
      let bad = 0;
      for (let i = 0; i < view.length; i++) if (!Number.isFinite(view[i])) bad++;
      if (bad)
        throw new DataError(
          `${st.file}: tensor ${spec.name} has ${bad} of ${view.length} values NaN or infinite`,
          st.file,
          undefined,
          spec.name,
        );
      dtypes.add(entry.dtype);
    }
    return { dtypes: [...dtypes] };
  } finally {
    for (const st of opened) st.close();
  }
}
