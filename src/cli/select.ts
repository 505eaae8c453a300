/**
 * `arbor select <run-dir> --method limr|s2l (--top K | --threshold X) --to subset.jsonl`: rank the
 * items of a finished (short) run by their reward dynamics (replay/select-dynamics.ts: LIMR, S2L)
 * and write the chosen items as dataset rows `{ id, prompt, answer, score, ... }`, which the
 * `dataset` task trains on (`task: { name: dataset, options: { train: subset.jsonl, fields: { id: id } } }`).
 * Prompts and answers come from the run's own task (its config.resolved.yaml: the train split the
 * run drew from); the prompt is the task's formatted prompt, so the dataset's default `{prompt}`
 * template reproduces it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ArborError, DataError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import type { TaskItem } from '../core/types.js';
import {
  histogram,
  readRewardCurves,
  selectByDynamics,
  dynamicsSelectFromConfig,
  type DynamicsSelection,
  type DynamicsSelectOptions,
} from '../replay/select-dynamics.js';
import { loadConfig } from '../run/config.js';
import { taskFromConfig } from '../tasks/index.js';
import { parseCommand, printHelp, type CommandSpec, type Flags } from './args.js';

export const SELECT: CommandSpec = {
  name: 'select',
  positionals: '<run-dir>',
  minPositionals: 1,
  maxPositionals: 1,
  summary:
    "Rank a run's items by their reward dynamics (LIMR: alignment with the run's learning curve; S2L: k-means " +
    'over reward curves, balanced over clusters) and write the chosen items as dataset rows {id, prompt, answer, ' +
    'score}. Log trees every step (run.logTreesEvery: 1).',
  flags: {
    method: { type: 'string', value: 'limr|s2l', doc: 'scoring method (default limr)' },
    top: { type: 'string', value: 'K', doc: 'keep K items (limr: the best scores; s2l: the budget, required)' },
    threshold: { type: 'string', value: 'X', doc: "limr: keep items scoring ≥ X (default 0.6, LIMR's)" },
    clusters: { type: 'string', value: 'K', doc: 's2l: k-means clusters (default 10)' },
    seed: { type: 'string', value: 'S', doc: 's2l: seed of k-means++ and the draws (default 0)' },
    'steps-per-bin': {
      type: 'string',
      value: 'N',
      doc: 'bin curves by N steps (default: by visit, the k-th draw of an item is bin k)',
    },
    bins: { type: 'string', value: 'K', doc: 'curve length (default: the median number of bins an item has)' },
    'max-reward': { type: 'string', value: 'R', doc: 'limr: the best reward in the normaliser (default 1)' },
    to: { type: 'string', value: 'FILE', doc: 'the JSONL file to write (required)' },
    force: { type: 'boolean', doc: 'replace an existing file' },
  },
};

/** The schema's options from the command line (absent flags keep their defaults). */
function optionsFromFlags(f: Flags): DynamicsSelectOptions {
  const spec: Record<string, unknown> = {};
  const num = (flagName: string, key: string) => {
    const v = f.number(flagName, undefined);
    if (v !== undefined) spec[key] = v;
  };
  if (f.string('method') !== undefined) spec.method = f.string('method');
  num('top', 'top');
  num('threshold', 'threshold');
  num('clusters', 'clusters');
  num('seed', 'seed');
  num('steps-per-bin', 'stepsPerBin');
  num('bins', 'bins');
  num('max-reward', 'maxReward');
  if (spec.method === 's2l' && spec.threshold !== undefined)
    throw new ArborError('select: --threshold is for limr; s2l keeps --top K items spread over its clusters');
  return dynamicsSelectFromConfig(spec);
}

/** The run's train items by id (the task and pool its config.resolved.yaml describes). */
export async function runItems(runDir: string): Promise<Map<string, TaskItem>> {
  const file = join(runDir, 'config.resolved.yaml');
  if (!existsSync(file)) throw new DataError(`${runDir}: no config.resolved.yaml (is it a run directory?)`, file);
  const config = loadConfig(file);
  const task = await taskFromConfig(config.task);
  return new Map(task.makeItems('train', config.run.trainItems, config.run.seed).map((i) => [i.id, i]));
}

export interface SelectRow {
  id: string;
  prompt: string;
  answer: string;
  score: number;
  method: string;
  cluster?: number;
  demonstration?: string;
  curve: number[];
}

/** Score a run's items and build the rows of the chosen ones (best score first). */
export async function selectRun(
  runDir: string,
  o: DynamicsSelectOptions,
): Promise<{ rows: SelectRow[]; selection: DynamicsSelection; files: number; trees: number }> {
  const { curves, files, trees } = readRewardCurves(runDir);
  if (!curves.size)
    throw new DataError(`${runDir}: the logged trees hold no scored leaves to select from`, join(runDir, 'trees'));
  const selection = selectByDynamics(curves, o);
  const items = await runItems(runDir);
  const rows = selection.ranked
    .filter((r) => r.chosen)
    .map((r): SelectRow => {
      const item = items.get(r.id);
      if (!item)
        throw new DataError(
          `${runDir}: item "${r.id}" of the logged trees is not in the run's train split (task or data changed since the run?)`,
          join(runDir, 'config.resolved.yaml'),
        );
      const row: SelectRow = {
        id: r.id,
        prompt: item.prompt,
        answer: item.answer,
        score: r.score,
        method: o.method,
        curve: r.curve,
      };
      if (r.cluster !== undefined) row.cluster = r.cluster;
      if (item.demonstration !== undefined) row.demonstration = item.demonstration;
      return row;
    });
  return { rows, selection, files, trees };
}

/** The printed report: counts, the learning curve, a score histogram, the extremes. */
export function selectReport(
  to: string,
  o: DynamicsSelectOptions,
  r: { rows: SelectRow[]; selection: DynamicsSelection; files: number; trees: number },
): string {
  const { ranked, dropped, baseline, bins, clusterSizes } = r.selection;
  const fmt = (x: number) => (Math.abs(x) >= 1000 ? x.toExponential(2) : x.toFixed(3));
  const lines = [
    `${o.method}: ${ranked.length} items ranked from ${r.trees} trees in ${r.files} tree files; ${dropped.length} left unscored (fewer than ${bins} bins)`,
  ];
  lines.push(
    `learning curve over ${bins} bins (${o.stepsPerBin > 0 ? `${o.stepsPerBin} steps each` : 'by visit'}): ${baseline.map(fmt).join(' ')}`,
  );
  const h = histogram(ranked.map((x) => x.score));
  const peak = Math.max(1, ...h.counts);
  const width = (h.hi - h.lo) / h.counts.length;
  lines.push(`score histogram (${o.method === 'limr' ? 'LIMR alignment' : 'mean reward'}):`);
  h.counts.forEach((c, i) =>
    lines.push(
      `  [${fmt(h.lo + i * width).padStart(7)}, ${fmt(h.lo + (i + 1) * width).padStart(7)}` +
        `${i === h.counts.length - 1 ? ']' : ')'} ${String(c).padStart(6)} ${'#'.repeat(Math.round((c / peak) * 40))}`,
    ),
  );
  if (ranked.length > 1 && h.hi - h.lo < 1e-12)
    lines.push(
      'warning: every item scores the same, so the curves carry nothing to select by (a run that learned nothing, or too few logged steps)',
    );
  if (clusterSizes)
    lines.push(
      `clusters (k-means, ${clusterSizes.length}): sizes ${clusterSizes.join(' ')}; kept per cluster ` +
        clusterSizes.map((_, c) => ranked.filter((x) => x.cluster === c && x.chosen).length).join(' '),
    );
  const rule = o.method === 's2l' ? `budget ${o.top}` : o.top > 0 ? `top ${o.top}` : `score ≥ ${o.threshold}`;
  lines.push(`kept ${r.rows.length} of ${ranked.length} (${rule}) → ${to}`);
  lines.push(
    `best: ${ranked
      .slice(0, 3)
      .map((x) => `${x.id} ${fmt(x.score)}`)
      .join(', ')}; worst: ${ranked
      .slice(-3)
      .map((x) => `${x.id} ${fmt(x.score)}`)
      .join(', ')}`,
  );
  lines.push(`train on it: task: { name: dataset, options: { train: ${to}, fields: { id: id } } }`);
  return lines.join('\n');
}

export async function selectCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, SELECT);
  if (f.help) return printHelp(SELECT);
  const to = f.string('to');
  if (!to) throw new ArborError('select: --to FILE is required (arbor select --help)');
  if (existsSync(to) && !f.bool('force')) throw new ArborError(`select: ${to} exists; pass --force to replace it`);
  const o = optionsFromFlags(f);
  const result = await selectRun(f.positionals[0], o);
  if (!result.rows.length) {
    const best = result.selection.ranked[0];
    throw new ArborError(
      `select: no item kept (${result.selection.ranked.length} ranked` +
        `${best ? `, best score ${best.score.toFixed(3)}` : ''}); lower --threshold or pass --top K`,
    );
  }
  writeFileAtomic(to, result.rows.map((r) => JSON.stringify(r) + '\n').join(''));
  console.log(selectReport(to, o, result));
  return 0;
}
