/**
 * `stopAfterGroups` for remote samplers (partial rollouts): requests run concurrently; as replies
 * arrive, groups whose requests have all finished are counted, and once `count` groups are done the
 * rest are stopped. How depends on the server: SGLang aborts by request id (`/abort_request`) and then
 * answers the pending /generate with the partial output (finish_reason abort), so nothing is lost;
 * vLLM's OpenAI server has no abort endpoint, so the HTTP request is cancelled (vLLM aborts a request
 * whose client disconnects) and the request comes back as one `abort` completion per choice with no
 * tokens. Unlike the embedded sampler this is timing-dependent, as on any real server.
 */
import type { SampleOptions, SampleRequest, SampleResult } from '../types.js';

export interface StopHooks {
  /** Ask the server to stop request i and reply with what it has (SGLang); absent = cancel the HTTP call. */
  abort?: (i: number) => void;
}

export async function sampleWithStopRule(
  requests: SampleRequest[],
  options: SampleOptions,
  one: (request: SampleRequest, i: number, signal: AbortSignal | undefined) => Promise<SampleResult>,
  weightVersion: number,
  hooks: StopHooks = {},
): Promise<SampleResult[]> {
  const stop = options.stopAfterGroups;
  if (!stop) return Promise.all(requests.map((r, i) => one(r, i, options.signal)));
  const controllers = requests.map(() => new AbortController());
  const onOuter = () => controllers.forEach((c) => c.abort(options.signal?.reason));
  options.signal?.addEventListener('abort', onOuter, { once: true });
  const open = new Map<number, number>();
  for (const g of stop.groupOf) open.set(g, (open.get(g) ?? 0) + 1);
  let groupsDone = 0;
  let stopped = false;
  const pending = new Set(requests.map((_, i) => i));
  const finish = (i: number) => {
    pending.delete(i);
    const g = stop.groupOf[i];
    open.set(g, open.get(g)! - 1);
    if (open.get(g) === 0) groupsDone++;
    if (!stopped && groupsDone >= stop.count) {
      stopped = true;
      for (const j of pending) (hooks.abort ? hooks.abort(j) : controllers[j].abort(new Error('stopAfterGroups')));
    }
  };
  try {
    return await Promise.all(requests.map(async (r, i) => {
      try {
        const result = await one(r, i, hooks.abort ? options.signal : controllers[i].signal);
        finish(i);
        return result;
      } catch (error) {
        if (!stopped || options.signal?.aborted) throw error;
        finish(i);
        return { completions: Array.from({ length: r.n ?? 1 }, () => ({ tokens: [], logprobs: [], finishReason: 'abort' as const })), usage: { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 }, weightVersion };
      }
    }));
  } finally {
    options.signal?.removeEventListener('abort', onOuter);
  }
}
