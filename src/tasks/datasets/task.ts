/**
 * Dataset-backed tasks: prompts and gold answers from JSONL/Parquet files, formatted by a template,
 * checked by a verifier (math equivalence by default). `gsm8k` and `math500` are presets over the
 * files in the shared data directory (`ARBOR_DATA_DIR`, default `../shared/data` next to the
 * repository); they are meant for real models behind a remote engine.
 *
 * Splits: with a `train` and a `test` file each split is its file. With one file, a deterministic
 * hash of the row id puts `testFraction` of the rows in the test split (1 = all rows are test: an
 * evaluation-only set such as MATH-500, whose train split is then an error).
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, DataError } from '../../core/errors.js';
import { Rng, hashString } from '../../core/rng.js';
import type { TaskItem } from '../../core/types.js';
import { exactReward, numericReward } from '../../filter/basic.js';
import { extractAnswer, goldAnswer, mathReward } from '../../filter/math/index.js';
import type { RewardFunction } from '../../filter/types.js';
import type { Split, Task } from '../types.js';
import { readDataset, type DatasetFormat, type DatasetRow, type FieldMapping } from './read.js';

export interface DatasetTaskOptions {
  /** Task name shown in logs. */
  name?: string;
  /** Train file (JSONL or Parquet). */
  train?: string;
  /** Test file; without it the test split is carved out of `train` by `testFraction`. */
  test?: string;
  format?: DatasetFormat;
  fields: FieldMapping;
  /** Prompt template: `{prompt}` is the mapped prompt field, `{column}` any other column of the row. */
  template?: string;
  /** How the gold answer is read from the answer field: as is, or extracted from a solution (`####`, `\boxed{}`, "The answer is"). */
  answerFrom?: 'field' | 'solution';
  verifier?: 'math' | 'exact' | 'numeric';
  /** Fraction of rows in the test split when there is only one file (1 = evaluation-only). */
  testFraction?: number;
}

/** The shared data directory: `$ARBOR_DATA_DIR`, else `../shared/data` beside the repository. */
export function defaultDataDir(): string {
  if (process.env.ARBOR_DATA_DIR) return resolve(process.env.ARBOR_DATA_DIR);
  const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
  return resolve(repo, '../shared/data');
}

function renderTemplate(template: string, row: DatasetRow): string {
  return template.replace(/\{(\w+)\}/g, (whole, key: string) => {
    if (key === 'prompt') return row.prompt;
    const v = row.raw[key];
    return v === undefined || v === null ? whole : String(v);
  });
}

/** GSM8K solutions carry calculator annotations `<<2*3=6>>`; demonstrations drop them. */
export function cleanSolution(solution: string): string {
  return solution.replace(/<<[^<>]*>>/g, '');
}

function verifierFor(kind: DatasetTaskOptions['verifier']): RewardFunction {
  if (kind === 'exact') return exactReward({ name: 'correct', extract: (r) => extractAnswer(r) ?? r });
  if (kind === 'numeric') return numericReward({ name: 'correct', extract: (r) => extractAnswer(r) ?? r });
  return mathReward({ name: 'correct' });
}

export interface DatasetTask extends Task {
  /** Read the files (idempotent); makeItems needs it. */
  prepare(): Promise<void>;
  /** Rows of each split after prepare(). */
  rows(split: Split): DatasetRow[];
}

export function datasetTask(
  options: DatasetTaskOptions,
  description = 'prompts and answers from a dataset file',
): DatasetTask {
  const name = options.name ?? 'dataset';
  const template = options.template ?? '{prompt}';
  const testFraction = options.testFraction ?? 0.1;
  const answerFrom = options.answerFrom ?? 'field';
  let splits: Record<Split, DatasetRow[]> | undefined;
  const items = new Map<string, TaskItem>();

  const toItem = (row: DatasetRow, split: Split): TaskItem => {
    const cached = items.get(`${split}/${row.id}`);
    if (cached) return cached;
    const gold = answerFrom === 'solution' ? (goldAnswer(row.answer) ?? extractAnswer(row.answer)) : row.answer.trim();
    if (gold === null)
      throw new DataError(
        `${row.file}:${row.line}: no final answer (####, \\boxed{}, "The answer is") in the solution field "${options.fields.answer}"`,
        row.file,
        row.line,
        options.fields.answer,
      );
    const item: TaskItem = {
      id: row.id,
      prompt: renderTemplate(template, row),
      answer: gold,
      demonstration: answerFrom === 'solution' ? cleanSolution(row.answer) : row.answer,
      meta: { file: row.file, line: row.line },
    };
    items.set(`${split}/${row.id}`, item);
    return item;
  };

  const task: DatasetTask = {
    name,
    description,
    reward: verifierFor(options.verifier),
    async prepare() {
      if (splits) return;
      if (!options.train && !options.test)
        throw new ConfigError(
          `task ${name}: give options.train and/or options.test (dataset files)`,
          'task.options.train',
        );
      const read = async (file: string) => {
        if (!existsSync(file)) throw new ConfigError(`task ${name}: dataset file not found: ${file}`, 'task.options');
        return readDataset(file, options.fields, options.format);
      };
      if (options.train && options.test) {
        splits = { train: await read(options.train), test: await read(options.test) };
      } else {
        const all = await read((options.train ?? options.test)!);
        const isTest = (row: DatasetRow) => (hashString(`${name}/${row.id}`) % 10_000) / 10_000 < testFraction;
        splits = { train: all.filter((r) => !isTest(r)), test: all.filter(isTest) };
      }
      // build every item now so a row without a usable answer fails at load, naming file and line
      for (const split of ['train', 'test'] as const) for (const row of splits[split]) toItem(row, split);
    },
    rows(split) {
      if (!splits) throw new Error(`task ${name}: call prepare() before reading items`);
      return splits[split];
    },
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      const rows = task.rows(split);
      if (!rows.length)
        throw new ConfigError(
          `task ${name}: the ${split} split is empty` +
            (split === 'train' && testFraction >= 1
              ? ' (an evaluation-only dataset: give options.train or testFraction < 1)'
              : ''),
          'task.options',
        );
      // test: file order (so evaluations are comparable across runs); train: a seeded shuffle
      const ordered = split === 'test' ? rows : new Rng(seed).fork(`${name}/train`).shuffle([...rows]);
      return ordered.slice(0, Math.min(count, ordered.length)).map((r) => toItem(r, split));
    },
    demonstration(item: TaskItem): string {
      return item.demonstration ?? item.answer;
    },
  };
  return task;
}

export const GSM8K_TEMPLATE = `{prompt}\nLet's think step by step and output the final answer after "####".`;
export const MATH_TEMPLATE = '{prompt}\nPlease reason step by step, and put your final answer within \\boxed{}.';

/** GSM8K (grade-school math): train/test files, gold after `####`, math verifier. */
export function gsm8kTask(options: { dataDir?: string; template?: string } = {}): DatasetTask {
  const dir = options.dataDir ?? defaultDataDir();
  return datasetTask(
    {
      name: 'gsm8k',
      train: resolve(dir, 'gsm8k/train.jsonl'),
      test: resolve(dir, 'gsm8k/test.jsonl'),
      fields: { prompt: 'question', answer: 'answer' },
      template: options.template ?? GSM8K_TEMPLATE,
      answerFrom: 'solution',
      verifier: 'math',
    },
    'GSM8K grade-school math word problems (7,473 train / 1,319 test); answer after ####',
  );
}

/** MATH-500: an evaluation set (all rows are test unless testFraction < 1), gold from "The answer is:", math verifier. */
export function math500Task(options: { dataDir?: string; template?: string; testFraction?: number } = {}): DatasetTask {
  const dir = options.dataDir ?? defaultDataDir();
  return datasetTask(
    {
      name: 'math500',
      test: resolve(dir, 'math500/test.jsonl'),
      fields: { prompt: 'question', answer: 'answer' },
      template: options.template ?? MATH_TEMPLATE,
      answerFrom: 'solution',
      verifier: 'math',
      testFraction: options.testFraction ?? 1,
    },
    'MATH-500 competition math (500 problems, evaluation set); answer in \\boxed{}',
  );
}
