/**
 * LoRA adapters in PEFT's format (huggingface/peft@5d602fd tuners/lora/config.py, utils/save_and_load.py):
 * `adapter_config.json` (peft_type LORA, r, lora_alpha, target_modules, ...) and
 * `adapter_model.safetensors` with `base_model.model.<module>.lora_A.weight` [r, in] and `.lora_B.weight`
 * [out, r], B unscaled (the scale α/r comes from the config). What PEFT, vLLM and SGLang load, Arbor loads
 * and writes. Refused with an error naming the file and field: DoRA, biases, modules_to_save, per-module
 * rank/alpha patterns, embedding LoRA, layer subsets, and an adapter whose modules or shapes do not fit
 * the base (an adapter for another model). `options.kernels` chooses where its arrays live (the
 * model's kernel memory by default; plain arrays for a copy that is validated and then discarded).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readJsonObject, writeFileAtomic } from '../../core/files.js';
import { DataError } from '../../core/errors.js';
import type { NanoModel } from '../model/model.js';
import type { Kernels } from '../kernels/types.js';
import { ALL_LORA_MODULES, LORA_MODULES, LoraAdapter, type LoraModule, type LoraSettings } from '../model/lora.js';
import { SafetensorsFile, writeSafetensors, type Tensor } from './safetensors.js';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

/** Whether `dir` holds a PEFT adapter. */
export function isPeftAdapterDir(dir: string): boolean {
  return existsSync(join(dir, ADAPTER_CONFIG)) && existsSync(join(dir, ADAPTER_WEIGHTS));
}

export interface PeftConfig {
  settings: LoraSettings;
  /** base_model_name_or_path as written (a hub id or a directory). */
  baseModel: string | undefined;
  raw: Record<string, unknown>;
}

/** Read and check adapter_config.json (the targets are resolved against the weights by `loadPeftAdapter`). */
export function readPeftConfig(dir: string): PeftConfig {
  const file = join(dir, ADAPTER_CONFIG);
  const raw = readJsonObject(file);
  const bad = (field: string, why: string) => new DataError(`${file}: ${field}: ${why}`, file, undefined, field);
  if (raw.peft_type !== undefined && raw.peft_type !== 'LORA')
    throw bad('peft_type', `${JSON.stringify(raw.peft_type)} is not LORA`);
  const r = raw.r;
  const alpha = raw.lora_alpha;
  if (!(typeof r === 'number' && Number.isInteger(r) && r >= 1))
    throw bad('r', `must be a positive integer, got ${JSON.stringify(r)}`);
  if (!(typeof alpha === 'number' && alpha > 0))
    throw bad('lora_alpha', `must be a positive number, got ${JSON.stringify(alpha)}`);
  const unsupported: Array<[string, (v: unknown) => boolean, string]> = [
    ['use_dora', (v) => v === true, 'DoRA adapters are not supported'],
    [
      'bias',
      (v) => v !== undefined && v !== null && v !== 'none',
      'adapter biases are not supported (bias must be "none")',
    ],
    ['lora_bias', (v) => v === true, 'LoRA biases are not supported'],
    ['modules_to_save', (v) => Array.isArray(v) && v.length > 0, 'fully trained extra modules are not supported'],
    ['fan_in_fan_out', (v) => v === true, 'Conv1D (fan_in_fan_out) layouts are not supported'],
    ['rank_pattern', (v) => isNonEmptyObject(v), 'per-module ranks are not supported'],
    ['alpha_pattern', (v) => isNonEmptyObject(v), 'per-module alphas are not supported'],
    ['layers_to_transform', (v) => v !== undefined && v !== null, 'adapters on a subset of layers are not supported'],
    ['target_parameters', (v) => Array.isArray(v) && v.length > 0, 'parameter targets are not supported'],
    ['trainable_token_indices', (v) => v !== undefined && v !== null, 'trainable tokens are not supported'],
  ];
  for (const [field, isBad, why] of unsupported) if (isBad(raw[field])) throw bad(field, why);
  const targets = targetModules(raw.target_modules, bad);
  const settings: LoraSettings = { rank: r, alpha, targets, useRslora: raw.use_rslora === true };
  return {
    settings,
    baseModel: typeof raw.base_model_name_or_path === 'string' ? raw.base_model_name_or_path : undefined,
    raw,
  };
}

function isNonEmptyObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && Object.keys(v).length > 0;
}

/** target_modules: a list of leaf names, "all-linear", or a regex (matched against the modules' paths). */
function targetModules(value: unknown, bad: (field: string, why: string) => DataError): LoraModule[] {
  if (value === 'all-linear') return [...ALL_LORA_MODULES];
  if (typeof value === 'string') {
    let re: RegExp;
    try {
      re = new RegExp(`^(?:${value})$`);
    } catch (cause) {
      throw bad('target_modules', `not a valid regular expression (${(cause as Error).message})`);
    }
    const hits = ALL_LORA_MODULES.filter((m) =>
      re.test(
        `model.layers.0.${m.endsWith('_proj') && ['gate_proj', 'up_proj', 'down_proj'].includes(m) ? 'mlp' : 'self_attn'}.${m}`,
      ),
    );
    if (!hits.length)
      throw bad('target_modules', `${JSON.stringify(value)} matches none of ${ALL_LORA_MODULES.join(', ')}`);
    return hits;
  }
  if (!Array.isArray(value) || !value.length || !value.every((v) => typeof v === 'string'))
    throw bad('target_modules', 'must be a list of module names, "all-linear" or a regular expression');
  const unknown = value.filter((v) => !(v in LORA_MODULES));
  if (unknown.length)
    throw bad(
      'target_modules',
      `${unknown.map((u) => JSON.stringify(u)).join(', ')}: not a linear layer this engine adapts (${ALL_LORA_MODULES.join(', ')})`,
    );
  return [...new Set(value as LoraModule[])];
}

/**
 * Load the adapter at `dir` onto `model` (a new LoraAdapter; the model is not changed). Every tensor of
 * adapter_model.safetensors must be an expected lora_A/lora_B with the base's shapes, and every expected
 * one must be present.
 */
export function loadPeftAdapter(dir: string, model: NanoModel, options: { kernels?: Kernels } = {}): LoraAdapter {
  const { settings } = readPeftConfig(dir);
  const adapter = new LoraAdapter(model, settings, options.kernels);
  const file = join(dir, ADAPTER_WEIGHTS);
  const st = SafetensorsFile.open(file);
  try {
    const expected = new Map(adapter.params.specs.map((s) => [s.name, s]));
    for (const name of st.header.entries.keys()) {
      if (expected.has(name)) continue;
      const module = /^base_model\.model\.(.*)\.(lora_[AB]|lora_embedding_[AB])(\.weight)?$/.exec(name);
      const why = !module
        ? 'not a LoRA tensor name (base_model.model.<module>.lora_A.weight)'
        : module[2].startsWith('lora_embedding')
          ? 'embedding LoRA is not supported'
          : `module ${module[1]} is not in this base model or not in target_modules ${JSON.stringify(settings.targets)}`;
      throw new DataError(
        `${file}: tensor ${name}: ${why} (an adapter for another base model?)`,
        file,
        undefined,
        name,
      );
    }
    for (const spec of adapter.params.specs) {
      const entry = st.entry(spec.name);
      if (!entry)
        throw new DataError(
          `${file}: missing tensor ${spec.name} (target_modules lists it, or the adapter is for another base model)`,
          file,
          undefined,
          spec.name,
        );
      if (entry.shape.join(',') !== spec.shape.join(',')) {
        throw new DataError(
          `${file}: tensor ${spec.name} has shape [${entry.shape}], this base model needs [${spec.shape}] (an adapter for another base model?)`,
          file,
          undefined,
          spec.name,
        );
      }
      const view = adapter.params.get(spec.name);
      st.read(spec.name, view);
      for (let i = 0; i < view.length; i++) {
        if (!Number.isFinite(view[i]))
          throw new DataError(`${file}: tensor ${spec.name} has NaN or infinite values`, file, undefined, spec.name);
      }
    }
  } finally {
    st.close();
  }
  return adapter;
}

/** The adapter_config.json Arbor writes (tinker-cookbook's build_lora_adapter fields, plus use_rslora/use_dora). */
export function peftConfigJson(settings: LoraSettings, baseModel: string): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    auto_mapping: null,
    base_model_name_or_path: baseModel,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    lora_alpha: settings.alpha,
    lora_dropout: 0.0,
    modules_to_save: null,
    r: settings.rank,
    rank_pattern: {},
    alpha_pattern: {},
    target_modules: [...settings.targets].sort(),
    task_type: 'CAUSAL_LM',
    use_rslora: settings.useRslora === true,
    use_dora: false,
  };
}

/** Write the adapter as PEFT files into `dir` (each file atomically). */
export function savePeftAdapter(dir: string, adapter: LoraAdapter, baseModel: string): void {
  mkdirSync(dir, { recursive: true });
  const tensors: Record<string, Tensor> = Object.fromEntries(
    adapter.params.specs.map((s) => [s.name, { shape: s.shape, data: adapter.params.get(s.name) }]),
  );
  writeSafetensors(join(dir, ADAPTER_WEIGHTS), tensors, { format: 'pt' });
  writeFileAtomic(
    join(dir, ADAPTER_CONFIG),
    JSON.stringify(peftConfigJson(adapter.settings, baseModel), null, 2) + '\n',
  );
}
