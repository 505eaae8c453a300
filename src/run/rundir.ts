/**
 * The run directory: config.resolved.yaml, metrics.jsonl (one JSON line per step, after one per step of
 * a warm-start SFT trained by this run: `sft_step`, no `step`), trees/step-N.jsonl,
 * checkpoints/step-N/ (engine state + state.json), summary.json and report.html. Appends are
 * flushed per line, so a crash loses at most the step in progress; every other file is written
 * atomically (a temporary file renamed over it).
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { DataError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { treeForLog, treeToJSON, type RolloutTree } from '../core/tree.js';
import type { ArborConfig } from './config.js';

export interface StepMetrics {
  step: number;
  [key: string]: number | string | null | undefined;
}

/** One step of the warm-start SFT a run trained (metrics.jsonl lines before step 0's; they have no `step`). */
export interface SftMetrics {
  sft_step: number;
  sft_steps: number;
  /** The step's training loss (token mean over the batch's completion tokens). */
  sft_loss: number;
  /** The held-out loss, on the steps that measured it (every tenth of the steps, and the last). */
  sft_heldout_loss?: number;
  sft_lr: number;
  sft_tokens_per_s: number;
}

/** The metrics.jsonl line of one SFT step. */
export function sftMetrics(p: {
  step: number;
  steps: number;
  loss: number;
  heldOutLoss?: number;
  learningRate: number;
  tokensPerSecond: number;
}): SftMetrics {
  return {
    sft_step: p.step,
    sft_steps: p.steps,
    sft_loss: p.loss,
    ...(p.heldOutLoss !== undefined ? { sft_heldout_loss: p.heldOutLoss } : {}),
    sft_lr: p.learningRate,
    sft_tokens_per_s: p.tokensPerSecond,
  };
}

const isStep = (row: unknown): row is StepMetrics => typeof (row as { step?: unknown } | null)?.step === 'number';
const isSft = (row: unknown): row is SftMetrics => typeof (row as { sft_step?: unknown } | null)?.sft_step === 'number';

/** What a run directory holds (anything else makes it someone else's directory). */
export const RUN_DIR_ENTRIES = new Set([
  'config.resolved.yaml',
  'metrics.jsonl',
  'summary.json',
  'report.html',
  'trees',
  'checkpoints',
  'store-spill.jsonl',
  'logs',
]);

export class RunDir {
  constructor(readonly path: string) {}

  /** Start a fresh run here: files of an earlier run in the same directory are removed first. */
  create(config: ArborConfig): void {
    for (const name of RUN_DIR_ENTRIES)
      if (name !== 'config.resolved.yaml') rmSync(join(this.path, name), { recursive: true, force: true });
    mkdirSync(join(this.path, 'trees'), { recursive: true });
    mkdirSync(join(this.path, 'checkpoints'), { recursive: true });
    writeFileAtomic(join(this.path, 'config.resolved.yaml'), YAML.stringify(config));
  }

  get metricsFile(): string {
    return join(this.path, 'metrics.jsonl');
  }

  appendMetrics(m: StepMetrics | SftMetrics): void {
    appendFileSync(this.metricsFile, JSON.stringify(m) + '\n');
  }

  /** The RL lines of metrics.jsonl (those with a `step`: step 0's evaluation, then one per step). */
  readMetrics(): StepMetrics[] {
    return this.readLines().filter(isStep);
  }

  /** The warm-start SFT's lines of metrics.jsonl (empty when this run used a cached warm start). */
  readSftMetrics(): SftMetrics[] {
    return this.readLines().filter(isSft);
  }

  /**
   * Every metrics line. A last line without its newline that does not parse is a write a kill cut
   * short (lines are appended whole otherwise): it is dropped, and resume rewrites the file.
   */
  readLines(): Array<StepMetrics | SftMetrics> {
    if (!existsSync(this.metricsFile)) return [];
    const text = readFileSync(this.metricsFile, 'utf8');
    const lines = text.split('\n');
    const torn = !text.endsWith('\n') ? lines.length - 1 : -1;
    const out: Array<StepMetrics | SftMetrics> = [];
    lines.forEach((l, i) => {
      if (!l.trim()) return;
      try {
        out.push(JSON.parse(l) as StepMetrics | SftMetrics);
      } catch (cause) {
        if (i === torn) return;
        throw new DataError(`${this.metricsFile}:${i + 1}: invalid JSON`, this.metricsFile, i + 1, undefined, {
          cause,
        });
      }
    });
    return out;
  }

  /** Keep the SFT lines and the step lines with step ≤ `step` (used when resuming from an earlier checkpoint). */
  truncateMetrics(step: number): void {
    const kept = this.readLines().filter((m) => !isStep(m) || m.step <= step);
    writeFileAtomic(this.metricsFile, kept.map((m) => JSON.stringify(m) + '\n').join(''));
  }

  writeTrees(step: number, trees: RolloutTree[]): void {
    writeFileAtomic(
      join(this.path, 'trees', `step-${step}.jsonl`),
      trees.map((t) => treeToJSON(treeForLog(t))).join('\n') + '\n',
    );
  }

  checkpointDir(step: number): string {
    return join(this.path, 'checkpoints', `step-${step}`);
  }

  /** Steps that have a complete checkpoint (state.json written last), ascending. */
  checkpoints(): number[] {
    const dir = join(this.path, 'checkpoints');
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .map((d) => /^step-(\d+)$/.exec(d))
      .filter((m): m is RegExpExecArray => !!m && existsSync(join(dir, m[0], 'state.json')))
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  readConfigText(): string {
    const file = join(this.path, 'config.resolved.yaml');
    if (!existsSync(file)) throw new DataError(`${this.path}: not a run directory (no config.resolved.yaml)`, file);
    return readFileSync(file, 'utf8');
  }

  writeJson(name: string, value: unknown): void {
    writeFileAtomic(join(this.path, name), JSON.stringify(value, null, 2) + '\n');
  }

  writeText(name: string, text: string): void {
    writeFileAtomic(join(this.path, name), text);
  }
}
