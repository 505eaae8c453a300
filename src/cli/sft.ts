/**
 * `arbor sft`: supervised training of a nano model from a JSONL file of {prompt, completion} rows
 * (engine/nano/sft.ts does the training), with a progress line, then saves a checkpoint.
 */
import { readSftJsonl, sftFromScratch } from '../engine/build.js';
import { flag, numberFlag } from './args.js';

/** `arbor sft --data file.jsonl --out dir [--steps N --batch B --lr X --model-size tiny|small|medium --seed S]` */
export async function sftCommand(argv: string[]): Promise<number> {
  const data = flag(argv, 'data');
  const out = flag(argv, 'out');
  if (!data || !out) {
    process.stderr.write('usage: arbor sft --data file.jsonl --out dir [--steps 300] [--batch 32] [--lr 3e-3] [--model-size tiny|small|medium] [--context 256] [--seed 0]\n');
    return 2;
  }
  const examples = readSftJsonl(data);
  const tty = process.stderr.isTTY && !process.env.CI;
  const result = await sftFromScratch({
    examples,
    out,
    modelSize: flag(argv, 'model-size') ?? 'tiny',
    contextLength: numberFlag(argv, 'context', 256),
    steps: numberFlag(argv, 'steps', 300),
    batchSize: numberFlag(argv, 'batch', 32),
    learningRate: numberFlag(argv, 'lr', 3e-3),
    seed: numberFlag(argv, 'seed', 0),
    onProgress: (p) => {
      const bar = '#'.repeat(Math.round((p.step / p.steps) * 30)).padEnd(30, '.');
      const line = `sft [${bar}] ${p.step}/${p.steps} loss ${p.loss.toFixed(4)}${p.heldOutLoss !== undefined ? ` held-out ${p.heldOutLoss.toFixed(4)}` : ''} ${Math.round(p.tokensPerSecond)} tok/s`;
      if (tty) process.stderr.write(`\r${line}`);
      else if (p.heldOutLoss !== undefined || p.step === p.steps) process.stderr.write(line + '\n');
    },
  });
  if (tty) process.stderr.write('\n');
  process.stdout.write(`saved ${out}: final train loss ${result.trainLoss.toFixed(4)}${result.heldOutLoss !== undefined ? `, held-out loss ${result.heldOutLoss.toFixed(4)}` : ''}, ${(result.wallMs / 1000).toFixed(1)} s\n`);
  return 0;
}
