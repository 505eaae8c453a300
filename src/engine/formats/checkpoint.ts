/**
 * Checkpoint directories: `model.safetensors` (parameters by name), `config.json` (NanoConfig),
 * `tokenizer.json`; optionally `optimizer.safetensors` + `trainer.json` for exact resume. Loading
 * validates names and shapes against the config and names the file at fault.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/files.js';
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import type { Kernels } from '../kernels/types.js';
import { defaultNanoConfig, type NanoConfig } from '../model/config.js';
import { NanoModel } from '../model/model.js';
import type { ParamArena } from '../model/params.js';
import { readSafetensors, writeSafetensors, type Tensor } from './safetensors.js';
import { CharTokenizer } from '../tokenizer/char.js';
import { loadKernels } from '../kernels/index.js';

export function arenaTensors(arena: ParamArena): Record<string, Tensor> {
  return Object.fromEntries(arena.specs.map((s) => [s.name, { shape: s.shape, data: arena.get(s.name) }]));
}

export function loadArena(arena: ParamArena, file: string): void {
  const { tensors } = readSafetensors(file);
  const nonFinite: string[] = [];
  for (const s of arena.specs) {
    const t = tensors[s.name];
    if (!t) throw new DataError(`${file}: missing tensor ${s.name}`, file, undefined, s.name);
    if (t.shape.join(',') !== s.shape.join(','))
      throw new DataError(
        `${file}: tensor ${s.name} has shape [${t.shape}], config expects [${s.shape}]`,
        file,
        undefined,
        s.name,
      );
    const bad = t.data.reduce((n, x) => n + (Number.isFinite(x) ? 0 : 1), 0);
    if (bad) nonFinite.push(`${s.name} (${bad} of ${t.data.length})`);
  }
  if (nonFinite.length) {
    const first = nonFinite[0].replace(/ \(.*$/, '');
    throw new DataError(
      `${file} has NaN or infinite weights in ${nonFinite.length} tensor(s): ${nonFinite.slice(0, 3).join(', ')}` +
        `${nonFinite.length > 3 ? ', ...' : ''}; a checkpoint with NaN or infinite values cannot be used`,
      file,
      undefined,
      first,
    );
  }
  // every tensor is checked before any is copied: a bad file leaves the arena as it was
  for (const s of arena.specs) {
    arena.get(s.name).set(tensors[s.name].data);
  }
}

export function saveCheckpoint(
  dir: string,
  model: NanoModel,
  tokenizer: CharTokenizer,
  extra: Record<string, unknown> = {},
): void {
  mkdirSync(dir, { recursive: true });
  writeSafetensors(join(dir, 'model.safetensors'), arenaTensors(model.params), { format: 'arbor-nano' });
  writeCheckpointMeta(dir, model, tokenizer, extra);
}

/** config.json + tokenizer.json beside a model.safetensors, so the directory loads with loadCheckpoint. */
export function writeCheckpointMeta(
  dir: string,
  model: NanoModel,
  tokenizer: CharTokenizer,
  extra: Record<string, unknown> = {},
): void {
  mkdirSync(dir, { recursive: true });
  writeFileAtomic(join(dir, 'config.json'), JSON.stringify({ ...model.config, ...extra }, null, 2));
  writeFileAtomic(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON(), null, 2));
}

/** Every file a loadable checkpoint needs is there (files are written atomically, so present = whole). */
export function isCheckpointDir(dir: string): boolean {
  return ['model.safetensors', 'config.json', 'tokenizer.json'].every((f) => existsSync(join(dir, f)));
}

export function readCheckpointConfig(dir: string): NanoConfig {
  const file = join(dir, 'config.json');
  if (!existsSync(file)) throw new DataError(`${dir}: not a checkpoint directory (no config.json)`, file);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (cause) {
    throw new DataError(`${file}: invalid JSON`, file, undefined, undefined, { cause });
  }
  const config = { ...defaultNanoConfig };
  for (const key of Object.keys(defaultNanoConfig) as Array<keyof NanoConfig>) {
    if (raw[key] !== undefined) (config as Record<string, unknown>)[key] = raw[key];
  }
  return config;
}

export async function loadCheckpoint(
  dir: string,
  options: { kernels?: Kernels } = {},
): Promise<{ model: NanoModel; tokenizer: CharTokenizer }> {
  const config = readCheckpointConfig(dir);
  const kernels = options.kernels ?? (await loadKernels());
  const model = NanoModel.createSync(config, kernels, 0);
  loadArena(model.params, join(dir, 'model.safetensors'));
  const tokFile = join(dir, 'tokenizer.json');
  let tokenizer: CharTokenizer;
  try {
    tokenizer = CharTokenizer.fromJSON(JSON.parse(readFileSync(tokFile, 'utf8')), tokFile);
  } catch (cause) {
    if (cause instanceof DataError) throw cause;
    throw new DataError(`${tokFile}: cannot read tokenizer`, tokFile, undefined, undefined, { cause });
  }
  if (tokenizer.vocabSize > config.vocabSize)
    throw new DataError(
      `${tokFile}: tokenizer has ${tokenizer.vocabSize} ids but model vocabSize is ${config.vocabSize}`,
      tokFile,
    );
  return { model, tokenizer };
}
