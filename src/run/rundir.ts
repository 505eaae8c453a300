/**
 * The run directory: config.resolved.yaml, metrics.jsonl (one JSON line per step), trees/step-N.jsonl,
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

  appendMetrics(m: StepMetrics): void {
    appendFileSync(this.metricsFile, JSON.stringify(m) + '\n');
  }

  /**
   * Every metrics line. A last line without its newline that does not parse is a write a kill cut
   * short (lines are appended whole otherwise): it is dropped, and resume rewrites the file.
   */
  readMetrics(): StepMetrics[] {
    if (!existsSync(this.metricsFile)) return [];
    const text = readFileSync(this.metricsFile, 'utf8');
    const lines = text.split('\n');
    const torn = !text.endsWith('\n') ? lines.length - 1 : -1;
    const out: StepMetrics[] = [];
    lines.forEach((l, i) => {
      if (!l.trim()) return;
      try {
        out.push(JSON.parse(l) as StepMetrics);
      } catch (cause) {
        if (i === torn) return;
        throw new DataError(`${this.metricsFile}:${i + 1}: invalid JSON`, this.metricsFile, i + 1, undefined, {
          cause,
        });
      }
    });
    return out;
  }

  /** Keep only metric lines with step ≤ `step` (used when resuming from an earlier checkpoint). */
  truncateMetrics(step: number): void {
    const kept = this.readMetrics().filter((m) => m.step <= step);
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
