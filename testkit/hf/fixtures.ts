/**
 * The transformers reference fixtures (../shared/data/hf-reference, or $ARBOR_DATA_DIR/hf-reference):
 * paths, reference.json, the reference tensors, and one comparison rule shared by the parity tests and
 * `npm run bench -- hf`: |got − ref| ≤ atol·max|ref| + rtol·|ref| entry by entry, reporting the worst
 * entry as a share of its tolerance (> 1 fails).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { decodeSafetensors } from '../../src/engine/nano/safetensors.js';

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
  const meta = JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as { sequences: number[][]; prompt_lengths: number[]; loss: number };
  const { tensors } = decodeSafetensors(readFileSync(join(dir, 'reference.safetensors')), join(dir, 'reference.safetensors'));
  return { dir, sequences: meta.sequences, promptLengths: meta.prompt_lengths, loss: meta.loss, tensors: Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, t.data])) };
}

export interface Tolerance {
  /** Absolute part, as a fraction of max|ref| over the compared tensor. */
  atol: number;
  /** Relative part, per entry. */
  rtol: number;
}

export interface Comparison {
  name: string;
  pass: boolean;
  maxAbs: number;
  /** The worst entry's |got − ref| over its tolerance (≤ 1 passes). */
  worstRatio: number;
  detail?: string;
}

export function compare(name: string, got: ArrayLike<number>, ref: ArrayLike<number>, tol: Tolerance): Comparison {
  if (got.length !== ref.length) return { name, pass: false, maxAbs: Infinity, worstRatio: Infinity, detail: `length ${got.length} vs ${ref.length}` };
  let scale = 0;
  for (let i = 0; i < ref.length; i++) scale = Math.max(scale, Math.abs(ref[i]));
  let maxAbs = 0;
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(got[i] - ref[i]);
    const ratio = d / (tol.atol * scale + tol.rtol * Math.abs(ref[i]) + 1e-30);
    if (!(d <= maxAbs)) maxAbs = d;
    if (!(ratio <= worst)) {
      worst = ratio;
      worstAt = i;
    }
  }
  const pass = worst <= 1;
  return { name, pass, maxAbs, worstRatio: worst, detail: pass ? undefined : `worst at [${worstAt}]: ${got[worstAt]} vs ${ref[worstAt]}` };
}
