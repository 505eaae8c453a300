/**
 * `stopAfterGroups` for remote samplers (partial rollouts): requests run concurrently; as replies
 * arrive, groups whose requests have all finished (every completion stop/length) are counted, and once
 * `count` groups are done the requests still in flight are stopped. How depends on the server: SGLang
 * aborts by request id (`/abort_request`) and then answers the pending /generate with the partial
 * output (finish_reason abort), so nothing is lost; vLLM's OpenAI server has no abort endpoint, so the
 * HTTP request is cancelled through an internal AbortController (vLLM aborts a request whose client
 * disconnects) and the request comes back as one `abort` completion per choice with no tokens. A
 * request whose server does not answer within `graceMs` of its /abort_request, or fails after the
 * stop, is cancelled the same way. Only the caller's own signal makes the call throw. Unlike the
 * embedded sampler this is timing-dependent, as on any real server.
 */
import { EngineCallError } from '../../core/errors.js';
import type { SampleOptions, SampleRequest, SampleResult } from '../types.js';

export interface StopHooks {
  /** Ask the server to stop request i and reply with what it has (SGLang); absent = cancel the HTTP call. */
  abort?: (i: number) => void;
  /** After `abort(i)`, cancel the HTTP call if no reply came within this many ms. Default 2000. */
  graceMs?: number;
}

/** Run `one` for every request, applying `options.stopAfterGroups`; results in request order. */
export async function sampleWithStopRule(
  requests: SampleRequest[],
  options: SampleOptions,
  one: (request: SampleRequest, i: number, signal: AbortSignal | undefined) => Promise<SampleResult>,
  weightVersion: number,
  hooks: StopHooks = {},
): Promise<SampleResult[]> {
  const stop = options.stopAfterGroups;
  if (!stop) return Promise.all(requests.map((r, i) => one(r, i, options.signal)));
  if (stop.groupOf.length !== requests.length)
    throw new EngineCallError(
      `stopAfterGroups.groupOf has ${stop.groupOf.length} entries for ${requests.length} requests`,
      { isRetryable: false },
    );
  if (stop.count <= 0) return requests.map((r) => abortedResult(r, weightVersion));
  const controllers = requests.map(() => new AbortController());
  const onOuter = () => controllers.forEach((c) => c.abort(options.signal?.reason));
  options.signal?.addEventListener('abort', onOuter, { once: true });
  const timers: NodeJS.Timeout[] = [];
  const inFlight = new Set(requests.map((_, i) => i));
  const groups = groupCounter(stop.groupOf);
  let stopped = false;
  const stopRest = () => {
    stopped = true;
    for (const j of inFlight) {
      if (!hooks.abort) controllers[j].abort(new Error('stopAfterGroups'));
      else {
        hooks.abort(j);
        timers.push(setTimeout(() => controllers[j].abort(new Error('stopAfterGroups')), hooks.graceMs ?? 2000));
      }
    }
  };
  const settle = (i: number, finished: boolean) => {
    inFlight.delete(i);
    if (groups.settle(i, finished) >= stop.count && !stopped) stopRest();
  };
  try {
    return await Promise.all(
      requests.map(async (r, i) => {
        try {
          const result = await one(r, i, controllers[i].signal);
          settle(
            i,
            result.completions.every((c) => c.finishReason !== 'abort'),
          );
          return result;
        } catch (error) {
          if (!stopped || options.signal?.aborted) throw error;
          settle(i, false);
          return abortedResult(r, weightVersion);
        }
      }),
    );
  } finally {
    options.signal?.removeEventListener('abort', onOuter);
    for (const t of timers) clearTimeout(t);
  }
}

/** Tracks, per group, the requests not yet finished; `settle` returns how many groups are done. */
function groupCounter(groupOf: number[]): { settle: (i: number, finished: boolean) => number } {
  const open = new Map<number, number>();
  for (const g of groupOf) open.set(g, (open.get(g) ?? 0) + 1);
  const failed = new Set<number>();
  let done = 0;
  return {
    settle(i, finished) {
      const g = groupOf[i];
      if (!finished) failed.add(g);
      open.set(g, open.get(g)! - 1);
      if (open.get(g) === 0 && !failed.has(g)) done++;
      return done;
    },
  };
}

/** A request stopped before its reply: one `abort` completion per continuation, no tokens. */
function abortedResult(r: SampleRequest, weightVersion: number): SampleResult {
  const completions = Array.from({ length: r.n ?? 1 }, () => ({
    tokens: [],
    logprobs: [],
    finishReason: 'abort' as const,
  }));
  return { completions, usage: { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 }, weightVersion };
}
