/**
 * Weight-sync hooks: after the trainer publishes new weights (a directory, or a `tinker://` path that
 * is first downloaded and converted to a PEFT adapter by tinker-archive.ts), tell the sampling servers
 * to load them; the caller then bumps the sampler's weight version. Modes:
 * - `vllm_load_lora_adapter`: `/v1/unload_lora_adapter` (404 = not loaded yet, fine) then
 *   `/v1/load_lora_adapter` without `load_inplace` (absent in vLLM 0.10.2); replies are plain text.
 * - `sglang_load_lora_adapter`: SGLang's `/unload_lora_adapter` then `/load_lora_adapter`.
 * - `sglang_update_weights_from_disk`: full checkpoints only (SGLang cannot load an adapter this way),
 *   with `weight_version: "arbor-v<N>"`, which SGLang then reports in every reply.
 * - `none`: an external process syncs.
 * `serverSync` loads weights on one server (the sampler fleet, fleet.ts, runs it per server, inside
 * that server's SwapGate, and again on a server that comes back); `weightSyncFromSpec` loads them on
 * a list of servers at once and fails if one fails (servers outside the fleet, e.g. behind a router).
 */
import { EngineCallError } from '../../core/errors.js';
import type { FleetTarget, ServerSync } from './fleet.js';
import { JsonClient } from './http.js';

export type WeightSyncSpec =
  | { kind: 'none' }
  | { kind: 'sglang_update_weights_from_disk'; servers: string[] }
  | { kind: 'vllm_load_lora_adapter' | 'sglang_load_lora_adapter'; servers: string[]; loraName: string };

/**
 * Replies. vLLM (vllm-project/vllm@27873cab vllm/entrypoints/serve/lora/api_router.py;
 * openai/models/serving.py@4fe45004): 200 `Response(content="Success: LoRA adapter '<n>' added
 * successfully.")` — text, no JSON; errors are JSON `ErrorResponse` with 400 (duplicate) / 404
 * (unknown adapter). SGLang (sgl-project/sglang@0025436e python/sglang/srt/entrypoints/http_server.py,
 * io_struct.py@001067ff): `{success, error_message}` for the LoRA endpoints, `{success, message}`
 * for update_weights_from_disk (200, or 400 on failure).
 */
export interface SGLangLoraReply {
  success?: boolean;
  error_message?: string | null;
}
export interface SGLangUpdateWeightsReply {
  success?: boolean;
  message?: string;
}

export interface WeightSync {
  /** Load the weights at `path` on every server; resolves once all confirmed. */
  sync(path: string, version: number, signal?: AbortSignal): Promise<void>;
}

export interface WeightSyncHooks {
  /** Runs `swap` while no sampling request is in flight (the sampler's SwapGate). */
  exclusive?: <T>(swap: () => Promise<T>) => Promise<T>;
  /** Turns a `tinker://` path into a local adapter directory the servers can read. */
  resolvePath?: (path: string) => Promise<string>;
  /** Called once the adapter is loaded everywhere: route requests to it (model / lora_path = name). */
  onAdapterLoaded?: (loraName: string) => void;
}

/**
 * A writer-preferring readers-writer gate: sampling requests `enter`/`leave` (shared); a weight swap
 * runs `exclusive` once the requests in flight have finished, and new requests wait for it.
 */
export class SwapGate {
  private active = 0;
  private swapping: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  async enter(): Promise<void> {
    while (this.swapping) await this.swapping;
    this.active++;
  }

  leave(): void {
    this.active--;
    if (this.active === 0) this.drained?.();
  }

  /** Requests in flight right now. */
  get inFlight(): number {
    return this.active;
  }

  async exclusive<T>(swap: () => Promise<T>): Promise<T> {
    while (this.swapping) await this.swapping;
    let done!: () => void;
    this.swapping = new Promise<void>((resolve) => (done = resolve));
    try {
      if (this.active > 0) await new Promise<void>((resolve) => (this.drained = resolve));
      this.drained = undefined;
      return await swap();
    } finally {
      this.swapping = undefined;
      done();
    }
  }

  /** Run one sampling request inside the gate. */
  async run<T>(request: () => Promise<T>): Promise<T> {
    await this.enter();
    try {
      return await request();
    } finally {
      this.leave();
    }
  }
}

/**
 * How one server loads a published version (undefined for `none`): the path must already be local
 * (`resolveSyncPath`). Returns the weight version the server will report in replies, when known.
 */
export function serverSync(spec: WeightSyncSpec): ServerSync | undefined {
  if (spec.kind === 'none') return undefined;
  if (spec.kind === 'sglang_update_weights_from_disk') return updateFromDisk;
  const swap = spec.kind === 'vllm_load_lora_adapter' ? vllmSwap : sglangSwap;
  return async (client, target, signal) => {
    await swap(client, spec.loraName, target.path!, signal);
    return undefined;
  };
}

/** The directory the servers load for `path`: a `tinker://` adapter is downloaded and converted first. */
export async function resolveSyncPath(
  spec: WeightSyncSpec,
  path: string,
  hooks: WeightSyncHooks = {},
): Promise<string> {
  if (!path.startsWith('tinker://')) return path;
  if (spec.kind === 'sglang_update_weights_from_disk') {
    throw new EngineCallError(
      `weightSync sglang_update_weights_from_disk: ${path} is a Tinker LoRA adapter, and ` +
        'update_weights_from_disk loads full checkpoints only; use weightSync.kind sglang_load_lora_adapter',
      { isRetryable: false },
    );
  }
  return (hooks.resolvePath ?? noResolver)(path);
}

/** Load on every server of `spec.servers` at once (inside `hooks.exclusive`); any failure fails the sync. */
export function weightSyncFromSpec(spec: WeightSyncSpec, hooks: WeightSyncHooks = {}): WeightSync {
  const one = serverSync(spec);
  if (!one || spec.kind === 'none') return { sync: async () => undefined };
  const clients = spec.servers.map(
    (s) => new JsonClient({ baseUrl: s, concurrency: 4, retry: { maxAttempts: 3, timeoutMs: 600_000 } }),
  );
  const exclusive = hooks.exclusive ?? (<T>(swap: () => Promise<T>) => swap());
  return {
    async sync(path, version, signal) {
      const target: FleetTarget = { version, path: await resolveSyncPath(spec, path, hooks) };
      await exclusive(() => Promise.all(clients.map((c) => one(c, target, signal))));
      if (spec.kind !== 'sglang_update_weights_from_disk') hooks.onAdapterLoaded?.(spec.loraName);
    },
  };
}

/**
 * SGLang `/update_weights_from_disk` with `weight_version` (sgl-project/sglang@7b50ab66
 * test/srt/test_weight_version.py: the version is then in every reply's meta_info); the token is the
 * server's own `weight_version` when its reply has one (arbor serve), else the one sent.
 */
const updateFromDisk: ServerSync = async (client, target, signal) => {
  const sent = `arbor-v${target.version}`;
  const reply = await client.call<SGLangUpdateWeightsReply & { weight_version?: unknown }>(
    '/update_weights_from_disk',
    { model_path: target.path, weight_version: sent },
    signal,
  );
  if (reply?.success === false)
    throw new EngineCallError(`${client.baseUrl}/update_weights_from_disk: ${reply.message ?? 'failed'}`, {
      url: client.baseUrl,
      isRetryable: false,
    });
  return reply?.weight_version !== undefined && reply.weight_version !== null ? String(reply.weight_version) : sent;
};

async function noResolver(path: string): Promise<string> {
  throw new EngineCallError(
    `weight sync: ${path} is a tinker:// path and no Tinker service is configured to download it`,
    { isRetryable: false },
  );
}

/** vLLM: unload (404 = not loaded) then load; both reply in plain text on success. */
async function vllmSwap(c: JsonClient, loraName: string, path: string, signal?: AbortSignal): Promise<void> {
  try {
    await c.call('/v1/unload_lora_adapter', { lora_name: loraName }, { signal, accept: 'text' });
  } catch (error) {
    if (!(error instanceof EngineCallError && error.details.status === 404)) throw error;
  }
  await c.call('/v1/load_lora_adapter', { lora_name: loraName, lora_path: path }, { signal, accept: 'text' });
}

/** SGLang: unload (an unknown adapter is a 400/404 or success:false, fine) then load. */
async function sglangSwap(c: JsonClient, loraName: string, path: string, signal?: AbortSignal): Promise<void> {
  try {
    await c.call<SGLangLoraReply>('/unload_lora_adapter', { lora_name: loraName }, { signal, accept: 'text' });
  } catch (error) {
    if (!(error instanceof EngineCallError && (error.details.status === 400 || error.details.status === 404)))
      throw error;
  }
  const reply = await c.call<SGLangLoraReply>(
    '/load_lora_adapter',
    { lora_name: loraName, lora_path: path },
    { signal },
  );
  if (reply?.success === false)
    throw new EngineCallError(`${c.baseUrl}/load_lora_adapter: ${reply.error_message ?? 'failed'}`, {
      url: `${c.baseUrl}/load_lora_adapter`,
      isRetryable: false,
    });
}
