/**
 * Running rewards safely: a per-call timeout, failures turned into a defined failure reward with the
 * reason in info.error, weighted composition of several rewards (each component logged), and batched
 * scoring with bounded concurrency that returns results in input order.
 */
import type { RewardResult } from '../core/types.js';
import type { RewardFunction, ScoreInput } from './types.js';

export interface SafeScoreOptions {
  /** Milliseconds before a call is abandoned (0 = no limit). */
  timeoutMs?: number;
  /** Reward given when the function throws or times out. */
  failureReward?: number;
}

/** Score one input; never throws (except for an abort of the caller's signal). */
export async function scoreSafely(
  fn: RewardFunction,
  input: ScoreInput,
  options: SafeScoreOptions = {},
  signal?: AbortSignal,
): Promise<RewardResult> {
  const failureReward = options.failureReward ?? 0;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      if (timeoutMs > 0)
        timer = setTimeout(() => {
          controller.abort();
          reject(new Error(`reward "${fn.name}" timed out after ${timeoutMs} ms`));
        }, timeoutMs);
    });
    const result = await Promise.race([fn.score(input, { signal: controller.signal }), timeout]);
    if (!Number.isFinite(result.reward)) throw new Error(`reward "${fn.name}" returned ${result.reward}`);
    return result;
  } catch (error) {
    if (signal?.aborted) throw error;
    return {
      reward: failureReward,
      components: { [fn.name]: failureReward },
      info: { error: (error as Error)?.message ?? String(error) },
    };
  } finally {
    if (timer) clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** Weighted sum of rewards; each component keeps its unweighted value under its own name. */
export function composeRewards(
  parts: Array<{ fn: RewardFunction; weight: number }>,
  options: SafeScoreOptions = {},
): RewardFunction {
  const name = parts.map((p) => p.fn.name).join('+');
  const grouped = parts.filter((p) => p.fn.prepareGroup);
  return {
    name,
    ...(grouped.length
      ? {
          async prepareGroup(inputs: ScoreInput[]) {
            let out = inputs;
            for (const p of grouped) out = await p.fn.prepareGroup!(out);
            return out;
          },
        }
      : {}),
    async score(input, context) {
      const results = await Promise.all(parts.map((p) => scoreSafely(p.fn, input, options, context?.signal)));
      const components: Record<string, number> = {};
      const info: Record<string, unknown> = {};
      let reward = 0;
      results.forEach((r, i) => {
        reward += parts[i].weight * r.reward;
        for (const [k, v] of Object.entries(r.components)) components[k] = v;
        info[parts[i].fn.name] = r.info;
      });
      return { reward, components, info };
    },
  };
}

/** Score many inputs with at most `concurrency` in flight; results in input order. */
export async function scoreBatch(
  fn: RewardFunction,
  inputs: ScoreInput[],
  options: SafeScoreOptions & { concurrency?: number } = {},
  signal?: AbortSignal,
): Promise<RewardResult[]> {
  const results = new Array<RewardResult>(inputs.length);
  let next = 0;
  const worker = async () => {
    while (next < inputs.length) {
      const i = next++;
      results[i] = await scoreSafely(fn, inputs[i], options, signal);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 8, inputs.length) }, worker));
  return results;
}
