/**
 * The remote half of `buildEngine` (engine.kind: remote): an OpenAI-compatible (vLLM), SGLang or
 * Tinker sampler, a Tinker-compatible trainer (sharing the Tinker session with a Tinker sampler), the
 * tokenizer of a checkpoint (char or Hugging Face), and the weight-sync hook run after every
 * saveForSampler: the sampler fleet (fleet.ts) loads the version on every server it can reach and
 * brings the others to it when they come back; later segments are tagged with the new version.
 * `remoteMetrics` gives the per-step fleet and trainer counters for metrics.jsonl.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import type { EngineConfig } from '../config.js';
import type { CharTokenizer } from '../tokenizer/char.js';
import type { HFTokenizer } from '../tokenizer/hf.js';
import { loadTokenizer } from '../tokenizer/load.js';
import { OpenAICompletionsSampler } from './openai-completions.js';
import { SGLangSampler } from './sglang.js';
import { TinkerTrainer } from './tinker.js';
import {
  resolveSyncPath,
  serverSync,
  weightSyncFromSpec,
  type WeightSyncHooks,
  type WeightSyncSpec,
} from './weight-sync.js';
import { tinkerApiKey } from '../../core/secret.js';
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
    retries: e.trainer?.retries,
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
  const s = e.sampler;
  const fleet = {
    retries: s.retries,
    requestTimeoutMs: s.requestTimeoutSeconds * 1000,
    unavailableMs: s.unavailableSeconds * 1000,
    probeMs: s.probeSeconds * 1000,
    log,
  };
  const sampler =
    s.api === 'openai'
      ? new OpenAICompletionsSampler({
          servers: s.servers,
          model: s.model,
          concurrencyPerServer: s.concurrencyPerServer,
          fleet,
        })
      : new SGLangSampler({ servers: s.servers, concurrencyPerServer: s.concurrencyPerServer, fleet });
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

/**
 * After save_weights_for_sampler: the fleet loads the weights on every sampling server it can reach
 * (the others get them when they come back) and tags later segments with the version. Sync servers
 * given apart from the sampling servers (workers behind a router) are loaded all at once instead,
 * and one that fails fails the sync: Arbor cannot route around a worker it does not sample from.
 */
function weightSyncHook(
  e: EngineConfig,
  sampler: OpenAICompletionsSampler | SGLangSampler,
  session: TinkerSession,
): (path: string, version: number) => Promise<void> {
  const w = e.weightSync;
  const sampling = e.sampler!.servers;
  const separate = w.servers.length > 0 && !sameSet(w.servers, sampling);
  const servers = separate ? w.servers : sampling;
  const spec: WeightSyncSpec =
    w.kind === 'none'
      ? { kind: 'none' }
      : w.kind === 'sglang_update_weights_from_disk'
        ? { kind: w.kind, servers }
        : { kind: w.kind, servers, loraName: w.loraName };
  const adapter =
    spec.kind === 'vllm_load_lora_adapter' || spec.kind === 'sglang_load_lora_adapter' ? spec.loraName : undefined;
  const hooks: WeightSyncHooks = {
    exclusive: (swap) => sampler.fleet.exclusive(swap),
    resolvePath: (path) =>
      fetchTinkerAdapter(path, {
        baseUrl: session.client.baseUrl,
        apiKey: session.options.apiKey,
        cacheDir: w.adapterDir ?? join(tmpdir(), 'arbor-adapters'),
        baseModel: e.trainer!.baseModel,
        tiedEmbeddings: w.tiedEmbeddings,
        languageModelPrefix: w.languageModelPrefix,
      }),
  };
  if (separate) {
    const sync = weightSyncFromSpec(spec, hooks);
    return async (path, version) => {
      await sync.sync(path, version);
      await sampler.fleet.publish({ version, adapter });
    };
  }
  sampler.fleet.setSync(serverSync(spec));
  return async (path, version) => {
    const local = spec.kind === 'none' ? undefined : await resolveSyncPath(spec, path, hooks);
    await sampler.fleet.publish({ version, path: local, adapter });
  };
}

function sameSet(a: string[], b: string[]): boolean {
  const norm = (u: string) => u.replace(/\/+$/, '');
  const x = new Set(a.map(norm));
  const y = new Set(b.map(norm));
  return x.size === y.size && [...x].every((u) => y.has(u));
}

/**
 * Per-step counters of a remote engine for metrics.jsonl: servers healthy at the newest version,
 * attempts retried and servers resynced since the previous call, and the trainer's retries and step.
 */
export function remoteMetrics(sampler: RemoteSampler, trainer: TinkerTrainer): () => Record<string, number> {
  let last = { retries: 0, resyncs: 0, trainerRetries: 0 };
  return () => {
    const m: Record<string, number> = {};
    const now = { retries: 0, resyncs: 0, trainerRetries: trainer.session.retries };
    if (!(sampler instanceof TinkerSampler)) {
      const f = sampler.fleet;
      now.retries = f.counters.retries;
      now.resyncs = f.counters.resyncs;
      Object.assign(m, {
        sampler_servers: f.servers.length,
        sampler_servers_healthy: f.healthy,
        sampler_retries: now.retries - last.retries,
        sampler_resyncs: now.resyncs - last.resyncs,
      });
    }
    m.trainer_retries = now.trainerRetries - last.trainerRetries;
    if (trainer.trainerStep !== undefined) m.trainer_step = trainer.trainerStep;
    last = now;
    return m;
  };
}
