/**
 * `arbor sft`: supervised training of a nano model from a JSONL file of {prompt, completion} rows or
 * OpenAI chat transcripts ({messages, tools}: rendered in --format, only assistant turns trained; what
 * `arbor export` writes for agent runs), with a progress line (step, loss, tokens/s, ETA; off a terminal
 * a line every tenth of the steps; --quiet: none), then saves a checkpoint.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ArborError } from '../core/errors.js';
import { readSftJsonl, sftFromScratch } from '../engine/build.js';
import { FORMAT_NAMES, formatFromName } from '../env/format/index.js';
import { Progress } from '../run/progress.js';
import { transcriptRowReader } from '../run/transcripts.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const SFT: CommandSpec = {
  name: 'sft',
  positionals: '',
  maxPositionals: 0,
  summary:
    'Supervised training of a fresh nano model on {"prompt", "completion"} JSONL rows or chat transcripts ' +
    '{"messages", "tools"}; saves a checkpoint.',
  flags: {
    data: {
      type: 'string',
      value: 'FILE',
      doc: 'JSONL of {"prompt", "completion"} rows or {"messages", "tools"} transcripts (required)',
    },
    format: {
      type: 'string',
      value: 'NAME',
      doc: `tool-call format transcripts are rendered in: ${FORMAT_NAMES.join(' | ')} (arbor)`,
    },
    out: { type: 'string', value: 'DIR', doc: 'checkpoint directory to write (required; new, empty, or a checkpoint)' },
    steps: { type: 'string', value: 'N', doc: 'optimiser steps (300)' },
    batch: { type: 'string', value: 'B', doc: 'sequences per step (32)' },
    lr: { type: 'string', value: 'X', doc: 'peak learning rate (3e-3)' },
    'model-size': { type: 'string', value: 'SIZE', doc: 'tiny | small | medium (tiny)' },
    context: { type: 'string', value: 'N', doc: 'context length in tokens (256)' },
    seed: { type: 'string', value: 'S', doc: 'seed (0)' },
    quiet: { type: 'boolean', doc: 'no progress on stderr (step, loss, tokens/s, ETA)' },
  },
};

/** `arbor sft --data file.jsonl --out dir [--format arbor|qwen3 --steps N --batch B --lr X --model-size SIZE]` */
export async function sftCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, SFT);
  if (f.help) return printHelp(SFT);
  const data = f.string('data');
  const out = f.string('out');
  if (!data || !out) throw new ArborError('usage: arbor sft --data file.jsonl --out dir [...] (arbor sft --help)');
  // every argument is checked before the (long) training, the output path included
  if (existsSync(out) && !statSync(out).isDirectory())
    throw new ArborError(`--out ${out} is an existing file; give a directory for the checkpoint`);
  if (existsSync(out) && readdirSync(out).length && !existsSync(join(out, 'model.safetensors')))
    throw new ArborError(
      `--out ${out} is a non-empty directory that holds no checkpoint; give an empty or new directory`,
    );
  const options = {
    contextLength: f.number('context', 256, { integer: true, min: 8, max: 65536 }),
    steps: f.number('steps', 300, { integer: true, min: 1, max: 10_000_000 }),
    batchSize: f.number('batch', 32, { integer: true, min: 1, max: 4096 }),
    learningRate: f.number('lr', 3e-3, { min: 1e-12, max: 10 }),
    seed: f.number('seed', 0, { integer: true, min: 0, max: 2 ** 32 - 1 }),
  };
  const formatName = f.string('format') ?? 'arbor';
  if (!(FORMAT_NAMES as string[]).includes(formatName))
    throw new ArborError(`--format ${formatName}: unknown tool-call format (known: ${FORMAT_NAMES.join(', ')})`);
  const examples = readSftJsonl(data, transcriptRowReader(formatFromName(formatName)));
  const progress = new Progress(f.bool('quiet'));
  const tick = progress.counter('sft', options.steps);
  const result = await sftFromScratch({
    examples,
    out,
    modelSize: f.string('model-size') ?? 'tiny',
    ...options,
    onProgress: (p) => {
      const held = p.heldOutLoss !== undefined ? ` held-out ${p.heldOutLoss.toFixed(4)}` : '';
      tick(p.step, `loss ${p.loss.toFixed(4)}${held} ${Math.round(p.tokensPerSecond)} tok/s`);
    },
  });
  progress.clear();
  process.stdout.write(
    `saved ${out}: final train loss ${result.trainLoss.toFixed(4)}` +
      `${result.heldOutLoss !== undefined ? `, held-out loss ${result.heldOutLoss.toFixed(4)}` : ''}, ` +
      `${(result.wallMs / 1000).toFixed(1)} s\n`,
  );
  return 0;
}
