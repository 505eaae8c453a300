/**
 * Weight-sync hooks: after the trainer publishes new weights (a directory or a service path), tell the
 * sampling servers to load them, then bump the sampler's weight version so every later segment is
 * tagged with it. Kinds: SGLang `POST /update_weights_from_disk {model_path}`, vLLM
 * `POST /v1/load_lora_adapter {lora_name, lora_path, load_inplace: true}` (server started with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora), or `none` (an external process syncs).
 */
import { EngineCallError } from '../../core/errors.js';
import { JsonClient } from './http.js';

export type WeightSyncSpec =
  | { kind: 'none' }
  | { kind: 'sglang_update_weights_from_disk'; servers: string[] }
  | { kind: 'vllm_load_lora_adapter'; servers: string[]; loraName: string };

export interface WeightSync {
  /** Load the weights at `path` on every server; resolves once all confirmed. */
  sync(path: string, version: number, signal?: AbortSignal): Promise<void>;
}

export function weightSyncFromSpec(spec: WeightSyncSpec): WeightSync {
  if (spec.kind === 'none') return { sync: async () => undefined };
  const clients = spec.servers.map((s) => new JsonClient({ baseUrl: s, concurrency: 4, retry: { maxAttempts: 3, timeoutMs: 600_000 } }));
  if (spec.kind === 'sglang_update_weights_from_disk') {
    return {
      async sync(path, _version, signal) {
        await Promise.all(
          clients.map(async (c) => {
            const reply = await c.call<{ success?: boolean; message?: string }>('/update_weights_from_disk', { model_path: path }, signal);
            if (reply?.success === false) throw new EngineCallError(`${c.baseUrl}/update_weights_from_disk: ${reply.message ?? 'failed'}`, { url: c.baseUrl, isRetryable: false });
          }),
        );
      },
    };
  }
  return {
    async sync(path, _version, signal) {
      await Promise.all(clients.map((c) => c.call('/v1/load_lora_adapter', { lora_name: spec.loraName, lora_path: path, load_inplace: true }, signal)));
    },
  };
}
