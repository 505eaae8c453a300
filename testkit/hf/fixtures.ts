/**
 * The transformers reference fixtures (../shared/data/hf-reference, or $ARBOR_DATA_DIR/hf-reference):
 * paths, reference.json and the reference tensors; the comparison rule is the PyTorch parity's
 * (testkit/reference/parity.ts): |got − ref| ≤ atol·max|ref| + rtol·|ref| entry by entry, the worst
 * entry reported as a share of its tolerance (> 1 fails).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { decodeSafetensors } from '../../src/engine/formats/safetensors.js';

export function hfReferenceDir(): string | undefined {
  const base = process.env.ARBOR_DATA_DIR ?? resolve(process.cwd(), '../shared/data');
  const dir = join(base, 'hf-reference');
  return existsSync(join(dir, 'README.md')) ? dir : undefined;
}

export interface ReferenceCase {
  dir: string;
  sequences: number[][];
  promptLengths: number[];
  loss: number;
  tensors: Record<string, Float32Array>;
}

/** reference.json + reference.safetensors of a model (or adapter) directory. */
export function readReference(dir: string): ReferenceCase {
  const meta = JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as {
    sequences: number[][];
    prompt_lengths: number[];
    loss: number;
  };
  const { tensors } = decodeSafetensors(
    readFileSync(join(dir, 'reference.safetensors')),
    join(dir, 'reference.safetensors'),
  );
  return {
    dir,
    sequences: meta.sequences,
    promptLengths: meta.prompt_lengths,
    loss: meta.loss,
    tensors: Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, t.data])),
  };
}

export type { Comparison, Tolerance } from '../reference/parity.js';
export { compare } from '../reference/parity.js';
