/**
 * generation_config.json's sampling defaults, read from a Hugging Face model directory (the end ids it
 * lists are the tokenizer's: tokenizer/hf.ts). `arbor serve` applies them as vLLM's
 * `--generation-config auto` does.
 */
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import { readJsonObject } from '../../core/files.js';

/** generation_config.json's sampling defaults (vLLM `--generation-config auto` lifts exactly these). */
export interface GenerationDefaults {
  temperature?: number;
  /** `top_p` */
  topP?: number;
  /** `top_k` */
  topK?: number;
  /** `min_p` */
  minP?: number;
  /** `repetition_penalty` */
  repetitionPenalty?: number;
  /** `max_new_tokens` */
  maxNewTokens?: number;
}

const GENERATION_KEYS: Array<[string, keyof GenerationDefaults]> = [
  ['temperature', 'temperature'],
  ['top_p', 'topP'],
  ['top_k', 'topK'],
  ['min_p', 'minP'],
  ['repetition_penalty', 'repetitionPenalty'],
  ['max_new_tokens', 'maxNewTokens'],
];

export function generationDefaults(generation: Record<string, unknown>, file: string): GenerationDefaults {
  const out: GenerationDefaults = {};
  for (const [key, name] of GENERATION_KEYS) {
    const value = generation[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new DataError(`${file}: ${key} must be a number (got ${JSON.stringify(value)})`, file, undefined, key);
    }
    out[name] = value;
  }
  return out;
}

/** The sampling defaults of `dir`/generation_config.json ({} when the file is absent). */
export function readGenerationDefaults(dir: string): GenerationDefaults {
  const file = join(dir, 'generation_config.json');
  return generationDefaults(readJsonObject(file, true) ?? {}, file);
}
