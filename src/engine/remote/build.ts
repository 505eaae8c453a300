/**
 * The remote half of `buildEngine` (engine.kind: remote): an OpenAI-compatible (vLLM) or SGLang
 * sampler over one or more servers, a Tinker-compatible trainer, the tokenizer of a checkpoint (char
 * or Hugging Face), and the weight-sync hook run after every saveForSampler (then every later segment
 * is tagged with the new weight version).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import type { EngineConfig } from '../config.js';
import { CharTokenizer } from '../nano/tokenizer.js';
import { HFTokenizer } from './hf-tokenizer.js';
import { OpenAICompletionsSampler } from './openai-completions.js';
import { SGLangSampler } from './sglang.js';
import { TinkerTrainer } from './tinker.js';
import { weightSyncFromSpec } from './weight-sync.js';

/** The embedded char tokenizer (tokenizer.json with kind "char") or a Hugging Face tokenizer.json. */
export function loadTokenizer(dir: string): CharTokenizer | HFTokenizer {
  const tokFile = join(dir, 'tokenizer.json');
  let json: { kind?: string };
  try {
    json = JSON.parse(readFileSync(tokFile, 'utf8'));
  } catch (cause) {
    throw new ConfigError(`engine.tokenizer: cannot load ${tokFile}: ${(cause as Error).message}`, 'engine.tokenizer', undefined, { cause });
  }
  return json.kind === 'char' ? CharTokenizer.fromJSON(json, tokFile) : HFTokenizer.fromDirectory(dir);
}

/** The sampling half of a remote engine (all `arbor eval` needs): sampler servers and tokenizer. */
export function buildRemoteSampler(e: EngineConfig): { sampler: OpenAICompletionsSampler | SGLangSampler; tokenizer: CharTokenizer | HFTokenizer; origin: string } {
  if (!e.sampler) throw new ConfigError('engine.sampler is required when engine.kind is remote', 'engine.sampler');
  if (!e.tokenizer) throw new ConfigError('engine.tokenizer (a checkpoint directory with tokenizer.json) is required when engine.kind is remote', 'engine.tokenizer');
  const tokenizer = loadTokenizer(e.tokenizer);
  const sampler = e.sampler.api === 'openai'
    ? new OpenAICompletionsSampler({ servers: e.sampler.servers, model: e.sampler.model, concurrencyPerServer: e.sampler.concurrencyPerServer })
    : new SGLangSampler({ servers: e.sampler.servers, concurrencyPerServer: e.sampler.concurrencyPerServer });
  return { sampler, tokenizer, origin: `remote ${e.sampler.api} ${e.sampler.servers.join(',')}` };
}

/** The Tinker-compatible trainer; each published version is synced to the samplers, then tagged. */
export function buildRemoteTrainer(e: EngineConfig, sampler: OpenAICompletionsSampler | SGLangSampler): TinkerTrainer {
  if (!e.trainer) throw new ConfigError('engine.trainer is required when engine.kind is remote', 'engine.trainer');
  if (!e.sampler) throw new ConfigError('engine.sampler is required when engine.kind is remote', 'engine.sampler');
  const sync = weightSyncFromSpec(
    e.weightSync.kind === 'none' ? { kind: 'none' }
    : e.weightSync.kind === 'sglang_update_weights_from_disk' ? { kind: e.weightSync.kind, servers: e.weightSync.servers.length ? e.weightSync.servers : e.sampler.servers }
    : { kind: e.weightSync.kind, servers: e.weightSync.servers.length ? e.weightSync.servers : e.sampler.servers, loraName: e.weightSync.loraName },
  );
  return new TinkerTrainer({
    baseUrl: e.trainer.url,
    baseModel: e.trainer.baseModel,
    modelId: e.trainer.modelId,
    loraRank: e.trainer.loraRank,
    onSamplerWeights: async (path, version) => {
      await sync.sync(path, version);
      sampler.setWeightVersion(version);
    },
  });
}
