/** One logged step's trees (trees/step-N.jsonl) as explorer views, decoded with the run's tokenizer. */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import { treeFromJSON } from '../../core/tree.js';
import type { TreeStep } from '../types.js';
import { treeView, type Decoder } from './tree-model.js';

export const MAX_TREE_FILE_BYTES = 256 * 1024 * 1024;
export const MAX_TREES = 1024;

export function readTreeStep(runDir: string, step: number, tokenizer: { decoder: Decoder; source: string }): TreeStep {
  if (!Number.isInteger(step) || step < 0) throw new DataError(`tree step must be a non-negative integer, got ${step}`);
  const file = join(runDir, 'trees', `step-${step}.jsonl`);
  if (!existsSync(file)) throw new DataError(`${file}: no trees logged for step ${step}`, file);
  if (statSync(file).size > MAX_TREE_FILE_BYTES)
    throw new DataError(`${file}: larger than ${MAX_TREE_FILE_BYTES} bytes`, file);
  const lines = readFileSync(file, 'utf8').split('\n');
  const trees = [];
  for (let i = 0; i < lines.length && trees.length < MAX_TREES; i++) {
    if (!lines[i].trim()) continue;
    trees.push(treeView(treeFromJSON(lines[i], `${file}:${i + 1}`), tokenizer.decoder));
  }
  return { step, tokenizer: tokenizer.source, trees };
}
