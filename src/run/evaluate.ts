/**
 * Held-out evaluation: greedy accuracy (temperature 0, one sample) and pass@k (k samples at
 * temperature 1; a prompt passes when any sample is correct) on fixed test items. All samples of an
 * evaluation go to the sampler in one call, or with `progress` in calls of at most a tenth of the
 * samples each, reported as they finish. Every request carries its seed (derived from the given Rng), so
 * results are exact functions of (weights, items, seed) either way.
 */
import { progressCounter, type ProgressUpdate } from '../core/progress-count.js';
import type { Rng } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import type { SampleRequest, SampleResult, Sampler } from '../engine/types.js';
import { scoreBatch } from '../filter/reward.js';
import { isCorrect } from '../filter/constants.js';
import type { RewardFunction } from '../filter/types.js';

export interface EvalResult {
  greedyAccuracy: number;
  passAtK: number | null;
  /** Mean accuracy of the k samples at temperature 1 (pass@1 estimate), null when k = 0. */
  sampleAccuracy: number | null;
  k: number;
  count: number;
  /** A task mixture's held-out figures per component (`meta.component`); absent for a plain task. */
  components?: Record<string, ComponentEval>;
  /** A few (prompt, response, reward) examples for the report. */
  samples: Array<{ prompt: string; response: string; reward: number }>;
  /** More held-out metrics logged with the evaluation (agent runs: eval_tool_call_rate, ...; a task mix: eval_greedy_acc/<component>). */
  extra?: Record<string, number>;
}

export interface ComponentEval {
  greedyAccuracy: number;
  sampleAccuracy: number | null;
  count: number;
}

export interface EvalContext {
  sampler: Sampler;
  encodePrompt: (item: TaskItem) => number[];
  decode: (tokens: number[]) => string;
  stopTokens: number[];
  maxResponseTokens: number;
  reward: RewardFunction;
  rng: Rng;
  /** The task's step judge (`Task.firstWrongStep`): with it, `eval_flawed_positive_rate` is logged. */
  firstWrongStep?: (item: TaskItem, response: string) => number | null;
  /** Status lines "evaluating: <done>/<total> samples eta <time>" as samples finish (a milestone every tenth). */
  progress?: ProgressUpdate;
}

export async function evaluate(items: TaskItem[], k: number, ctx: EvalContext): Promise<EvalResult> {
  const base = items.map((item) => ({
    tokens: ctx.encodePrompt(item),
    maxTokens: ctx.maxResponseTokens,
    stopTokens: ctx.stopTokens,
  }));
  const requests = [
    ...base.map((r) => ({ ...r, temperature: 0, n: 1, seed: 0 })),
    ...(k > 0 ? base.map((r) => ({ ...r, temperature: 1, n: k, seed: ctx.rng.nextU32() })) : []),
  ];
  const results = await sampleReporting(ctx.sampler, requests, ctx.progress);
  const greedyInputs = items.map((item, i) => ({ item, response: ctx.decode(results[i].completions[0].tokens) }));
  const greedy = await scoreBatch(ctx.reward, greedyInputs, { concurrency: 8 });
  let passAtK: number | null = null;
  let sampleAccuracy: number | null = null;
  let sampleCorrect: boolean[] = [];
  let sampledFlawed: number | undefined;
  if (k > 0) {
    const inputs = items.flatMap((item, i) =>
      results[items.length + i].completions.map((c) => ({ item, response: ctx.decode(c.tokens) })),
    );
    const scores = await scoreBatch(ctx.reward, inputs, { concurrency: 8 });
    let passed = 0;
    for (let i = 0; i < items.length; i++)
      if (scores.slice(i * k, (i + 1) * k).some((s) => isCorrect(s.reward))) passed++;
    passAtK = passed / items.length;
    sampleAccuracy = scores.filter((s) => isCorrect(s.reward)).length / scores.length;
    sampleCorrect = scores.map((s) => isCorrect(s.reward));
    sampledFlawed = flawedShare(
      inputs,
      scores.map((s) => s.reward),
      ctx.firstWrongStep,
    );
  }
  const correct = greedy.filter((s) => isCorrect(s.reward)).length;
  const components = byComponent(
    items,
    greedy.map((s) => isCorrect(s.reward)),
    sampleCorrect,
    k,
  );
  return {
    greedyAccuracy: correct / items.length,
    passAtK,
    sampleAccuracy,
    k,
    count: items.length,
    ...components,
    extra: {
      ...componentEvalMetrics(components),
      ...heldOutScores(
        greedyInputs,
        greedy.map((s) => s.reward),
        ctx.firstWrongStep,
      ),
      ...(sampledFlawed === undefined ? {} : { eval_sample_flawed_positive_rate: sampledFlawed }),
    },
    samples: greedyInputs
      .slice(0, 5)
      .map((g, i) => ({ prompt: g.item.prompt, response: g.response, reward: greedy[i].reward })),
  };
}

/**
 * `sampler.sample(requests)`, or with `progress` the same requests in calls of at most a tenth of the
 * samples (requests × n) each, about ten, each counted as it finishes. The calls start one per macrotask: a sampler
 * that computes synchronously (the embedded one) runs them one after another with a status line between,
 * a remote one has them all in flight at once.
 */
export async function sampleReporting(
  sampler: Sampler,
  requests: SampleRequest[],
  progress?: ProgressUpdate,
): Promise<SampleResult[]> {
  if (!progress || !requests.length) return sampler.sample(requests);
  const samples_R = requests.map((r) => r.n ?? 1);
  const total = samples_R.reduce((a, n) => a + n, 0);
  // calls of at most a tenth of the samples (a request of more samples than that alone)
  const tenth = Math.ceil(total / 10);
  const chunks: SampleRequest[][] = [[]];
  let filled = 0;
  requests.forEach((r, i) => {
    if (chunks.at(-1)!.length && filled + samples_R[i] > tenth) {
      chunks.push([]);
      filled = 0;
    }
    chunks.at(-1)!.push(r);
    filled += samples_R[i];
  });
  // each call is at most a tenth: each is a line of its own where lines are not rewritten
  const tick = progressCounter((text) => progress(text, true), 'evaluating:', total);
  let done = 0;
  const results = await Promise.all(
    chunks.map(async (chunk) => {
      await new Promise((resolve) => setImmediate(resolve));
      const out = await sampler.sample(chunk);
      done += chunk.reduce((a, r) => a + (r.n ?? 1), 0);
      tick(done, 'samples');
      return out;
    }),
  );
  return results.flat();
}

/**
 * The greedy responses' mean reward (`eval_greedy_score`: a graded task's mean score) and, with a step judge,
 * the share of correct greedy responses in which it finds a wrong step (`eval_flawed_positive_rate`, FAPO's
 * flawed positives; absent when no greedy response is correct). With `run.evalPassK` > 0 the same share over
 * the sampled responses is `eval_sample_flawed_positive_rate`.
 */
export function heldOutScores(
  inputs: Array<{ item: TaskItem; response: string }>,
  rewards: number[],
  judge?: (item: TaskItem, response: string) => number | null,
): Record<string, number> {
  const out: Record<string, number> = {};
  if (rewards.length) out.eval_greedy_score = rewards.reduce((a, r) => a + r, 0) / rewards.length;
  const flawed = flawedShare(inputs, rewards, judge);
  if (flawed !== undefined) out.eval_flawed_positive_rate = flawed;
  return out;
}

/**
 * The share of correct responses in which `judge` finds a wrong step (undefined without a judge or a correct
 * response). An unparseable scratchpad (−1) with a correct answer counts as flawed: its steps cannot be shown right.
 */
export function flawedShare(
  inputs: Array<{ item: TaskItem; response: string }>,
  rewards: number[],
  judge?: (item: TaskItem, response: string) => number | null,
): number | undefined {
  const correct = inputs.filter((_, i) => isCorrect(rewards[i]));
  if (!judge || !correct.length) return undefined;
  return correct.filter((g) => judge(g.item, g.response) !== null).length / correct.length;
}

/** Greedy and sampled accuracy per `meta.component` of a task mixture's items (nothing for a plain task). */
function byComponent(
  items: TaskItem[],
  greedy: boolean[],
  sampled: boolean[],
  k: number,
): { components?: Record<string, ComponentEval> } {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const c = item.meta?.component;
    if (typeof c === 'string') groups.set(c, [...(groups.get(c) ?? []), i]);
  });
  if (!groups.size) return {};
  const components: Record<string, ComponentEval> = {};
  for (const [label, idx] of groups) {
    const hits = sampled.length
      ? idx.reduce((a, i) => a + sampled.slice(i * k, (i + 1) * k).filter(Boolean).length, 0)
      : 0;
    components[label] = {
      greedyAccuracy: idx.filter((i) => greedy[i]).length / idx.length,
      sampleAccuracy: sampled.length ? hits / (idx.length * k) : null,
      count: idx.length,
    };
  }
  return { components };
}

/** Metrics-line keys of the per-component figures: `eval_greedy_acc/<component>` (and `eval_sample_acc/<component>`). */
export function componentEvalMetrics(result: Pick<EvalResult, 'components'>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [label, c] of Object.entries(result.components ?? {})) {
    out[`eval_greedy_acc/${label}`] = c.greedyAccuracy;
    if (c.sampleAccuracy !== null) out[`eval_sample_acc/${label}`] = c.sampleAccuracy;
  }
  return out;
}
