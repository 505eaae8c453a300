/**
 * DUMP's distribution-level curriculum (`select: { kind: ucb }`, arXiv 2504.09710) over the
 * components of a task mixture (`task.mix`). Following the authors' code (ZhentingWang/DUMP
 * verl/utils/curriculum_learning.py @ 92a2997172b53f0fd7d1fc17875c1c0e8d76adbd, CurriculumController.
 * compute_sampling_weights and LearnabilityEstimator.update):
 *   learnability  μ_j = mean |A| over the component's latest `window` samples (300), 0 before any;
 *   UCB_j = μ_j + c·√(2 ln(N + 1) / (n_j + 1)), N = Σ n_j, n_j = every sample the component gave (c = 1);
 *   weights = softmax(UCB / τ) (τ = 0.1); each prompt of the step draws its component from the weights.
 * A "sample" is one response (a leaf); its advantage is the GRPO advantage within its group
 * (r − mean)/(std + 1e-6), std unbiased as in verl's compute_grpo_outcome_advantage: solved and
 * hopeless components give |A| = 0 and lose share to the ones still being learned. Within a component
 * items come from the component's own seeded data order. The state (window, counts, each component's
 * data order) is plain JSON carried in the producer's control state, so it is saved with checkpoints
 * and resume is exact.
 */
import { z } from 'zod';
import { largestRemainder } from '../core/apportion.js';
import { hashString, type Rng } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import { componentOf } from '../tasks/mix.js';
import { DataOrder, type DataOrderState } from './data-order.js';

export const ucbSelectSchema = z
  .object({
    kind: z
      .literal('ucb')
      .describe('DUMP: UCB over the components of task.mix on their recent mean |advantage| (needs task.mix)'),
    c: z.number().min(0).max(100).default(1).describe('weight of the exploration bonus √(2 ln(N+1)/(n_j+1)) (DUMP: 1)'),
    window: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(300)
      .describe('latest samples (responses) per component in the mean |advantage| (DUMP: 300)'),
    temperature: z
      .number()
      .positive()
      .max(100)
      .default(0.1)
      .describe('softmax temperature over the UCB scores (DUMP: 0.1)'),
    allocation: z
      .enum(['sample', 'apportion'])
      .default('sample')
      .describe(
        "'sample': each prompt draws its component from the weights (DUMP); 'apportion': the step's prompts split by the weights (largest remainder)",
      ),
  })
  .strict();
export type UcbOptions = z.infer<typeof ucbSelectSchema>;

export interface UcbComponentState {
  /** Samples (responses) seen in all, n_j. */
  n: number;
  /** |advantage| of the latest `window` samples, newest last. */
  recent: number[];
  /** The component's own data order. */
  data: DataOrderState;
}

export interface UcbState {
  components: Record<string, UcbComponentState>;
}

export interface UcbScore {
  label: string;
  mean: number;
  bonus: number;
  ucb: number;
  weight: number;
}

/** The train pool split by component, in the mix's order (components without items are left out). */
export function componentPools(pool: TaskItem[], labels: string[]): Map<string, TaskItem[]> {
  const pools = new Map<string, TaskItem[]>(labels.map((l) => [l, []]));
  for (const item of pool) {
    const label = componentOf(item);
    if (label !== undefined) pools.get(label)?.push(item);
  }
  for (const [l, items] of pools) if (!items.length) pools.delete(l);
  return pools;
}

/** UCB scores and softmax weights of the components (pure: the unit tests check it by hand). */
export function ucbScores(state: UcbState, labels: string[], o: Pick<UcbOptions, 'c' | 'temperature'>): UcbScore[] {
  const total = labels.reduce((a, l) => a + (state.components[l]?.n ?? 0), 0);
  const raw = labels.map((label) => {
    const s = state.components[label];
    const mean = s && s.recent.length ? s.recent.reduce((a, v) => a + v, 0) / s.recent.length : 0;
    const bonus = o.c * Math.sqrt((2 * Math.log(total + 1)) / ((s?.n ?? 0) + 1));
    return { label, mean, bonus, ucb: mean + bonus, weight: 0 };
  });
  const max = Math.max(...raw.map((r) => r.ucb));
  const exps = raw.map((r) => Math.exp((r.ucb - max) / o.temperature));
  const sum = exps.reduce((a, v) => a + v, 0);
  raw.forEach((r, i) => (r.weight = exps[i] / sum));
  return raw;
}

/** GRPO advantages of one group's rewards: (r − mean)/(std + 1e-6), unbiased std (0 for a group of one). */
export function groupAdvantages(rewards: number[]): number[] {
  const n = rewards.length;
  if (n < 2) return rewards.map(() => 0);
  const mean = rewards.reduce((a, v) => a + v, 0) / n;
  const std = Math.sqrt(rewards.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1));
  return rewards.map((r) => (r - mean) / (std + 1e-6));
}

export class UcbCurriculum {
  readonly state: UcbState;
  private readonly labels: string[];
  private readonly orders = new Map<string, DataOrder>();
  private readonly scoresAtStart: UcbScore[];
  private readonly taken = new Map<string, number>();

  constructor(
    private readonly options: UcbOptions,
    private readonly pools: Map<string, TaskItem[]>,
    seed: number,
    state?: UcbState,
  ) {
    this.labels = [...pools.keys()];
    this.state = structuredClone(state ?? { components: {} });
    for (const label of this.labels) {
      const s = (this.state.components[label] ??= { n: 0, recent: [], data: { epoch: 0, cursor: 0 } });
      this.orders.set(
        label,
        new DataOrder(pools.get(label)!.length, hashString(`${seed}/ucb/${label}`), { ...s.data }),
      );
    }
    this.scoresAtStart = ucbScores(this.state, this.labels, options);
  }

  get scores(): UcbScore[] {
    return this.scoresAtStart;
  }

  /** `count` prompts: components by the weights at the start of the step, items by each component's data order. */
  take(count: number, rng: Rng): TaskItem[] {
    const weights = this.scoresAtStart.map((s) => s.weight);
    const counts =
      this.options.allocation === 'apportion'
        ? largestRemainder(
            weights.map((w) => w * count),
            count,
          )
        : drawCounts(weights, count, rng);
    return this.labels.flatMap((label, i) => {
      if (!counts[i]) return [];
      this.taken.set(label, (this.taken.get(label) ?? 0) + counts[i]);
      const order = this.orders.get(label)!;
      const items = order.take(counts[i]).map((j) => this.pools.get(label)![j]);
      this.state.components[label].data = { ...order.state };
      return items;
    });
  }

  /** One finished group of `label`: its responses' |GRPO advantage| join the window, n_j grows by the group size. */
  observe(label: string, rewards: number[]): void {
    const s = this.state.components[label];
    if (!s || !rewards.length) return;
    s.n += rewards.length;
    s.recent.push(...groupAdvantages(rewards).map(Math.abs));
    if (s.recent.length > this.options.window) s.recent.splice(0, s.recent.length - this.options.window);
  }

  /** Per-step log: each component's share of the prompts taken, its UCB score, mean |A| and weight (all at the step's start). */
  info(): Record<string, number> {
    const total = [...this.taken.values()].reduce((a, v) => a + v, 0);
    const out: Record<string, number> = {};
    for (const s of this.scoresAtStart) {
      out[`select/share/${s.label}`] = total ? (this.taken.get(s.label) ?? 0) / total : 0;
      out[`select/ucb/${s.label}`] = s.ucb;
      out[`select/adv/${s.label}`] = s.mean;
      out[`select/weight/${s.label}`] = s.weight;
    }
    return out;
  }
}

/** How many of `count` draws land on each index, each draw ∝ weights. */
function drawCounts(weights: number[], count: number, rng: Rng): number[] {
  const counts = weights.map(() => 0);
  const total = weights.reduce((a, v) => a + v, 0);
  for (let k = 0; k < count; k++) {
    let u = rng.next() * total;
    let i = 0;
    while (i < weights.length - 1 && u >= weights[i]) u -= weights[i++];
    counts[i]++;
  }
  return counts;
}
