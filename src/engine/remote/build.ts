/**
 * The remote half of `buildEngine` (engine.kind: remote): an OpenAI-compatible (vLLM), SGLang or
 * Tinker sampler, a Tinker-compatible trainer (sharing the Tinker session with a Tinker sampler), the
 * tokenizer of a checkpoint (char or Hugging Face), and the weight-sync hook run after every
 * saveForSampler (then every later segment is tagged with the new weight version).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import type { EngineConfig } from '../config.js';
import type { CharTokenizer } from '../nano/tokenizer.js';
import type { HFTokenizer } from '../tokenizer/hf.js';
import { loadTokenizer } from '../tokenizer/load.js';
import { OpenAICompletionsSampler } from './openai-completions.js';
import { SGLangSampler } from './sglang.js';
import { TinkerTrainer } from './tinker.js';
import { weightSyncFromSpec, type WeightSyncSpec } from './weight-sync.js';
import { tinkerApiKey } from './secret.js';
import { fetchTinkerAdapter } from './tinker-archive.js';
import { TinkerSampler } from './tinker-sampler.js';
import { TinkerSession } from './tinker-session.js';

type RemoteSampler = OpenAICompletionsSampler | SGLangSampler | TinkerSampler;

/** The session with the Tinker service (trainer and Tinker sampler share one). */
function tinkerSession(e: EngineConfig, log?: (line: string) => void): TinkerSession {
  const url = e.trainer?.url ?? e.sampler?.servers[0];
  if (!url) throw new ConfigError('engine.trainer.url is required for a Tinker session', 'engine.trainer.url');
  return new TinkerSession({
    baseUrl: url,
    apiKey: tinkerApiKey(e.trainer?.apiKey),
    warn: (line) => log?.(`warning: ${line}`),
  });
}

/** The sampling half of a remote engine (all `arbor eval` needs): sampler servers and tokenizer. */
export function buildRemoteSampler(
  e: EngineConfig,
  log?: (line: string) => void,
): { sampler: RemoteSampler; tokenizer: CharTokenizer | HFTokenizer; origin: string } {
  if (!e.sampler) throw new ConfigError('engine.sampler is required when engine.kind is remote', 'engine.sampler');
  if (!e.tokenizer)
    throw new ConfigError(
      'engine.tokenizer (a checkpoint directory with tokenizer.json) is required when engine.kind is remote',
      'engine.tokenizer',
    );
  const tokenizer = loadTokenizer(e.tokenizer);
  if (e.sampler.api === 'tinker') {
    const session = tinkerSession(e, log);
    const sampler = new TinkerSampler({ session, baseModel: e.trainer?.baseModel ?? e.sampler.model });
    return { sampler, tokenizer, origin: `remote tinker sampling ${session.client.baseUrl}` };
  }
  if (!e.sampler.servers.length)
    throw new ConfigError(
      `engine.sampler.servers: at least one server URL is required for api ${e.sampler.api}`,
      'engine.sampler.servers',
    );
  const sampler =
    e.sampler.api === 'openai'
      ? new OpenAICompletionsSampler({
          servers: e.sampler.servers,
          model: e.sampler.model,
          concurrencyPerServer: e.sampler.concurrencyPerServer,
        })
      : new SGLangSampler({ servers: e.sampler.servers, concurrencyPerServer: e.sampler.concurrencyPerServer });
  return { sampler, tokenizer, origin: `remote ${e.sampler.api} ${e.sampler.servers.join(',')}` };
}

/** Checks that the weight sync matches the sampler: the adapter kind fits the API, names can route. */
export function checkWeightSync(e: EngineConfig): void {
  const sync = e.weightSync;
  const api = e.sampler?.api;
  const need = (kind: string, sampler: string) => {
    if (sync.kind === kind && api !== sampler)
      throw new ConfigError(
        `engine.weightSync.kind ${kind} needs engine.sampler.api ${sampler} (got ${api})`,
        'engine.weightSync.kind',
      );
  };
  need('vllm_load_lora_adapter', 'openai');
  need('sglang_load_lora_adapter', 'sglang');
  need('sglang_update_weights_from_disk', 'sglang');
  if (api === 'tinker' && sync.kind !== 'none')
    throw new ConfigError(
      'engine.weightSync.kind must be none with engine.sampler.api tinker (the sampler switches to each saved sampler checkpoint itself)',
      'engine.weightSync.kind',
    );
  if (sync.kind === 'vllm_load_lora_adapter' && sync.loraName === e.sampler?.model) {
    throw new ConfigError(
      `engine.weightSync.loraName must differ from engine.sampler.model (${sync.loraName}): ` +
        'requests name the base model until the first sync and the adapter after it',
      'engine.weightSync.loraName',
    );
  }
}

/** The Tinker-compatible trainer; each published version is synced to the samplers, then tagged. */
export function buildRemoteTrainer(
  e: EngineConfig,
  sampler: RemoteSampler,
  log?: (line: string) => void,
): TinkerTrainer {
  if (!e.trainer) throw new ConfigError('engine.trainer is required when engine.kind is remote', 'engine.trainer');
  if (!e.sampler) throw new ConfigError('engine.sampler is required when engine.kind is remote', 'engine.sampler');
  checkWeightSync(e);
  const session = sampler instanceof TinkerSampler ? sampler.session : tinkerSession(e, log);
  const onSamplerWeights =
    sampler instanceof TinkerSampler
      ? (path: string, version: number) => sampler.useWeights(path, version)
      : weightSyncHook(e, sampler, session);
  return new TinkerTrainer({
    baseUrl: e.trainer.url,
    session,
    baseModel: e.trainer.baseModel,
    modelId: e.trainer.modelId,
    loraRank: e.trainer.loraRank,
    warn: (line) => log?.(`warning: ${line}`),
    onSamplerWeights,
  });
}

/** After save_weights_for_sampler: load the weights on the sampling servers, then tag later segments. */
function weightSyncHook(
  e: EngineConfig,
  sampler: OpenAICompletionsSampler | SGLangSampler,
  session: TinkerSession,
): (path: string, version: number) => Promise<void> {
  const w = e.weightSync;
  const servers = w.servers.length ? w.servers : e.sampler!.servers;
  const spec: WeightSyncSpec =
    w.kind === 'none'
      ? { kind: 'none' }
      : w.kind === 'sglang_update_weights_from_disk'
        ? { kind: w.kind, servers }
        : { kind: w.kind, servers, loraName: w.loraName };
  const sync = weightSyncFromSpec(spec, {
    exclusive: (swap) => sampler.gate.exclusive(swap),
    resolvePath: (path) =>
      fetchTinkerAdapter(path, {
        baseUrl: session.client.baseUrl,
        apiKey: session.options.apiKey,
        cacheDir: w.adapterDir ?? join(tmpdir(), 'arbor-adapters'),
        baseModel: e.trainer!.baseModel,
        tiedEmbeddings: w.tiedEmbeddings,
        languageModelPrefix: w.languageModelPrefix,
      }),
    onAdapterLoaded: (name) =>
      sampler instanceof OpenAICompletionsSampler ? sampler.setModel(name) : sampler.setLoraName(name),
  });
  return async (path, version) => {
    await sync.sync(path, version);
    sampler.setWeightVersion(version);
  };
}
