/**
 * The tokenizer a run was trained with, to decode its trees: the tokenizer.json of its newest
 * checkpoint (checkpoints/step-N/engine/), else of `model.checkpoint` / `model.hf` / `engine.tokenizer` in its
 * resolved config, else of the warm-start named in summary.json; the embedded engine's default
 * character tokenizer only when none of them exists (the result says which one was used).
 */
import { existsSync, readdirSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import YAML from 'yaml';
import { readFileSync } from 'node:fs';
import { defaultTokenizer } from '../../engine/build.js';
import { loadTokenizer } from '../../engine/tokenizer/load.js';
import type { Decoder } from './tree-model.js';

export interface RunTokenizer {
  decoder: Decoder;
  /** The tokenizer.json used, or "default char tokenizer". */
  source: string;
}

function checkpointDirs(runDir: string): string[] {
  const dir = join(runDir, 'checkpoints');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((d) => /^step-(\d+)$/.exec(d))
    .filter((m): m is RegExpExecArray => !!m)
    .sort((a, b) => Number(b[1]) - Number(a[1]))
    .map((m) => join(dir, m[0], 'engine'));
}

function configured(runDir: string): string[] {
  const out: string[] = [];
  try {
    const config = YAML.parse(readFileSync(join(runDir, 'config.resolved.yaml'), 'utf8')) as Record<
      string,
      Record<string, unknown>
    >;
    for (const v of [config?.model?.checkpoint, config?.model?.hf, config?.engine?.tokenizer])
      if (typeof v === 'string') out.push(v);
  } catch {
    // no readable config: the other candidates still apply
  }
  try {
    const summary = JSON.parse(readFileSync(join(runDir, 'summary.json'), 'utf8')) as Record<string, unknown>;
    if (typeof summary.warm_start === 'string') out.push(summary.warm_start);
  } catch {
    // no summary yet
  }
  return out;
}

/** Candidate directories holding a tokenizer.json, best first. Relative config paths: from the cwd, then from the run's parent's parent. */
export function tokenizerCandidates(runDir: string): string[] {
  const rel = configured(runDir).flatMap((p) => (isAbsolute(p) ? [p] : [resolve(p), resolve(runDir, '..', '..', p)]));
  return [...checkpointDirs(runDir), ...rel].filter((d) => existsSync(join(d, 'tokenizer.json')));
}

export function runTokenizer(runDir: string): RunTokenizer {
  for (const dir of tokenizerCandidates(runDir)) {
    try {
      return { decoder: loadTokenizer(dir), source: join(dir, 'tokenizer.json') };
    } catch {
      // unreadable: try the next candidate
    }
  }
  return { decoder: defaultTokenizer(), source: 'default char tokenizer' };
}
