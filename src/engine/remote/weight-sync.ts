/**
 * Weight-sync hooks: after the trainer publishes new weights (a directory, or a `tinker://` path that
 * is first downloaded and converted to a PEFT adapter by tinker-archive.ts), tell the sampling servers
 * to load them; the caller then bumps the sampler's weight version. Modes:
 * - `vllm_load_lora_adapter`: `/v1/unload_lora_adapter` (404 = not loaded yet, fine) then
 *   `/v1/load_lora_adapter` without `load_inplace` (absent in vLLM 0.10.2); replies are plain text.
 * - `sglang_load_lora_adapter`: SGLang's `/unload_lora_adapter` then `/load_lora_adapter`.
 * - `sglang_update_weights_from_disk`: full checkpoints only (SGLang cannot load an adapter this way).
 * - `none`: an external process syncs.
 * The LoRA swaps hold the sampler's SwapGate: no request is in flight on the servers while the
 * adapter is replaced, and requests use the adapter (model = lora name) once it is loaded.
 */
import { EngineCallError } from '../../core/errors.js';
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

export function weightSyncFromSpec(spec: WeightSyncSpec, hooks: WeightSyncHooks = {}): WeightSync {
  if (spec.kind === 'none') return { sync: async () => undefined };
  const clients = spec.servers.map(
    (s) => new JsonClient({ baseUrl: s, concurrency: 4, retry: { maxAttempts: 3, timeoutMs: 600_000 } }),
  );
  if (spec.kind === 'sglang_update_weights_from_disk') {
    return {
      async sync(path, _version, signal) {
        if (path.startsWith('tinker://')) {
          throw new EngineCallError(
            `weightSync sglang_update_weights_from_disk: ${path} is a Tinker LoRA adapter, and ` +
              'update_weights_from_disk loads full checkpoints only; use weightSync.kind sglang_load_lora_adapter',
            { isRetryable: false },
          );
        }
        await Promise.all(
          clients.map(async (c) => {
            const reply = await c.call<SGLangUpdateWeightsReply>(
              '/update_weights_from_disk',
              { model_path: path },
              signal,
            );
            if (reply?.success === false)
              throw new EngineCallError(`${c.baseUrl}/update_weights_from_disk: ${reply.message ?? 'failed'}`, {
                url: c.baseUrl,
                isRetryable: false,
              });
          }),
        );
      },
    };
  }
  const swapOne = spec.kind === 'vllm_load_lora_adapter' ? vllmSwap : sglangSwap;
  const exclusive = hooks.exclusive ?? (<T>(swap: () => Promise<T>) => swap());
  return {
    async sync(path, _version, signal) {
      const local = path.startsWith('tinker://') ? await (hooks.resolvePath ?? noResolver)(path) : path;
      await exclusive(() => Promise.all(clients.map((c) => swapOne(c, spec.loraName, local, signal))));
      hooks.onAdapterLoaded?.(spec.loraName);
    },
  };
}

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
