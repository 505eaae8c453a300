/**
 * Random Hugging Face models for the benches, cached under bench/out/models/<key> (the key names every
 * shape option, so a cached model is reused only for its own shape).
 */
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeHfModel, type MakeHfOptions } from '../src/engine/hf/make.js';
import { benchOutDir } from './util.js';

/** A model's shape: makeHfModel's options without the output directory. */
export type ModelShape = Omit<MakeHfOptions, 'out'>;

/** A directory name that changes with every shape option, so a cached model is reused only for its shape. */
export function modelKey(o: ModelShape): string {
  const arch = o.architecture.replace('ForCausalLM', '').toLowerCase();
  return [
    arch,
    `h${o.hiddenSize}`,
    `l${o.layers}`,
    `nh${o.heads}`,
    `kv${o.kvHeads ?? o.heads}`,
    `hd${o.headDim ?? 'auto'}`,
    `f${o.intermediateSize}`,
    `v${o.vocabSize}`,
    o.tieWordEmbeddings ? 'tied' : 'untied',
    `theta${o.ropeTheta ?? 'auto'}`,
    `eps${o.rmsNormEps ?? 'auto'}`,
    (o.dtype ?? 'F32').toLowerCase(),
    `seed${o.seed ?? 0}`,
  ].join('-');
}

/** bench/out/models/<key>: made into a temporary directory and renamed when absent (a marker file comes last). */
export function cachedModel(o: ModelShape): { dir: string; note: string } {
  const dir = join(benchOutDir, 'models', modelKey(o));
  if (existsSync(join(dir, 'bench-model.json'))) return { dir, note: 'cached' };
  const t0 = performance.now();
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const made = makeHfModel({ ...o, out: tmp });
  writeFileSync(join(tmp, 'bench-model.json'), JSON.stringify({ options: o, parameterCount: made.parameterCount }));
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return { dir, note: `made in ${((performance.now() - t0) / 1000).toFixed(1)} s` };
}
