/**
 * Which metrics.jsonl fields the dashboard and report.html chart, and how they are grouped: a fixed list,
 * plus the reward components a run logged (`reward/<name>`, one key per component its reward returns),
 * found in the rows themselves since their names are the user's, and the warm-start SFT's loss when the
 * run trained it (lines with `sft_step` and no `step`, charted against the SFT step whatever the x axis).
 */
import type { MetricsRow } from '../types.js';

export interface MetricDef {
  key: string;
  label: string;
  /** Multiply values by this (ms → s). */
  factor?: number;
  /** Draw dashed (a series that often coincides with another, e.g. accuracy = reward for a 0/1 reward). */
  dashed?: boolean;
}

export interface ChartDef {
  id: string;
  title: string;
  metrics: MetricDef[];
  /** An x axis of its own, in place of the panel's (the SFT chart's SFT step). */
  x?: { key: string; label: string };
}

export type XAxis = 'step' | 'tokens' | 'wall';

export const X_AXES: Record<XAxis, { key: string; label: string }> = {
  step: { key: 'step', label: 'step' },
  tokens: { key: 'tokens_decoded_total', label: 'tokens decoded (cumulative)' },
  wall: { key: 'wall_s', label: 'wall time (s)' },
};

const s = (key: string, label: string) => ({ key, label, factor: 1 / 1000 });

/** Every chart gets its own y scale: loss and entropy are never forced onto one axis. */
export const CHARTS: ChartDef[] = [
  {
    id: 'reward',
    title: 'Train reward and accuracy',
    metrics: [
      { key: 'reward_mean', label: 'reward' },
      { key: 'accuracy', label: 'accuracy', dashed: true },
    ],
  },
  {
    id: 'heldout',
    title: 'Held-out accuracy',
    metrics: [
      { key: 'eval_greedy_acc', label: 'greedy' },
      { key: 'eval_pass_at_k', label: 'pass@k' },
      { key: 'eval_sample_acc', label: 'sampled' },
    ],
  },
  { id: 'kl', title: 'Approx. KL', metrics: [{ key: 'approx_kl', label: 'approx KL' }] },
  { id: 'entropy', title: 'Entropy', metrics: [{ key: 'entropy', label: 'entropy' }] },
  { id: 'loss', title: 'Loss', metrics: [{ key: 'loss', label: 'loss' }] },
  { id: 'clip', title: 'Clip fraction', metrics: [{ key: 'clip_fraction', label: 'clip fraction' }] },
  { id: 'grad', title: 'Grad norm', metrics: [{ key: 'grad_norm', label: 'grad norm' }] },
  {
    id: 'tokens',
    title: 'Tokens per step',
    metrics: [
      { key: 'tokens_decoded', label: 'decoded' },
      { key: 'prefix_tokens_reused', label: 'prefix reused' },
    ],
  },
  {
    id: 'reuse',
    title: 'Prefix reuse ratio',
    metrics: [{ key: 'prefix_reuse_ratio', label: 'reused / (reused + computed)' }],
  },
  {
    id: 'packing',
    title: 'Trainer tokens computed / trained',
    metrics: [{ key: 'train_token_ratio', label: 'tree packing (1 = flat)' }],
  },
  {
    id: 'staleness',
    title: 'Staleness (versions)',
    metrics: [
      { key: 'staleness_mean', label: 'mean' },
      { key: 'staleness_max', label: 'max' },
    ],
  },
  { id: 'gap', title: 'Behaviour/current log-prob gap', metrics: [{ key: 'logprob_gap', label: 'mean |Δ log-prob|' }] },
  {
    id: 'stages',
    title: 'Seconds per stage',
    metrics: [
      s('ms_generate', 'generate'),
      s('ms_score', 'score'),
      s('ms_train', 'train'),
      s('ms_wait', 'learner waiting'),
    ],
  },
];

/** Single metrics offered when comparing runs (one chart each, one line per run). */
export const COMPARE_METRICS: MetricDef[] = [
  { key: 'eval_greedy_acc', label: 'held-out greedy accuracy' },
  { key: 'reward_mean', label: 'train reward' },
  { key: 'eval_pass_at_k', label: 'held-out pass@k' },
  { key: 'tokens_decoded', label: 'tokens decoded per step' },
  { key: 'entropy', label: 'entropy' },
  { key: 'approx_kl', label: 'approx KL' },
  { key: 'loss', label: 'loss' },
  { key: 'prefix_reuse_ratio', label: 'prefix reuse ratio' },
];

/** Metrics key prefix of the warm-start SFT's lines (src/run/rundir.ts `sftMetrics`). */
export const SFT_PREFIX = 'sft_';

/** The warm-start SFT's loss by SFT step: shown when a run logged it (a cached warm start logs none). */
export const SFT_CHART: ChartDef = {
  id: 'sft',
  title: 'Warm-start SFT loss',
  x: { key: 'sft_step', label: 'SFT step' },
  metrics: [
    { key: 'sft_loss', label: 'train' },
    { key: 'sft_heldout_loss', label: 'held-out' },
  ],
};

/** A remote run's sampler fleet (src/engine/remote/fleet.ts): shown when a run logged it. */
export const FLEET_CHART: ChartDef = {
  id: 'fleet',
  title: 'Sampler fleet',
  metrics: [
    { key: 'sampler_servers_healthy', label: 'servers healthy' },
    { key: 'sampler_retries', label: 'requests retried' },
    { key: 'sampler_resyncs', label: 'servers resynced' },
  ],
};

/** Metrics key prefix of a reward component (src/run/step-log.ts writes `reward/<name>`). */
export const REWARD_COMPONENT_PREFIX = 'reward/';

export function isRewardComponent(key: string): boolean {
  return key.startsWith(REWARD_COMPONENT_PREFIX) && key.length > REWARD_COMPONENT_PREFIX.length;
}

/** The reward-component keys present in any of the rows, sorted. */
export function rewardComponentKeys(rows: Iterable<MetricsRow>): string[] {
  const keys = new Set<string>();
  for (const row of rows) for (const k of Object.keys(row)) if (isRewardComponent(k)) keys.add(k);
  return [...keys].sort();
}

/**
 * One run's charts: CHARTS, with "Reward components" (a line per component) after the reward chart,
 * and the SFT loss last when the rows have it.
 */
export function runCharts(rows: Iterable<MetricsRow>): ChartDef[] {
  const all = [...rows];
  const sft = all.some((r) => r.sft_loss !== undefined) ? [SFT_CHART] : [];
  // remote runs: the sampling servers' health, retries and resyncs per step
  const fleet = all.some((r) => r.sampler_servers_healthy !== undefined) ? [FLEET_CHART] : [];
  const keys = rewardComponentKeys(all);
  if (!keys.length) return [...CHARTS, ...fleet, ...sft];
  const components: ChartDef = {
    id: 'reward-components',
    title: 'Reward components',
    metrics: keys.map((key) => ({ key, label: key.slice(REWARD_COMPONENT_PREFIX.length) })),
  };
  const at = CHARTS.findIndex((c) => c.id === 'reward') + 1;
  return [...CHARTS.slice(0, at), components, ...CHARTS.slice(at), ...fleet, ...sft];
}

/** Compare charts: COMPARE_METRICS, then one chart per reward component any of the runs logged. */
export function compareCharts(rows: Iterable<MetricsRow>): ChartDef[] {
  const single = (m: MetricDef): ChartDef => ({ id: m.key, title: m.label, metrics: [m] });
  const components = rewardComponentKeys(rows).map((key) => ({ key, label: `train ${key}` }));
  return [...COMPARE_METRICS, ...components].map(single);
}

export const COLORS = [
  '#2563eb',
  '#dc2626',
  '#16a34a',
  '#9333ea',
  '#ea580c',
  '#0891b2',
  '#ca8a04',
  '#db2777',
  '#4b5563',
  '#65a30d',
];
