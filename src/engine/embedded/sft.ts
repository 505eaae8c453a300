/**
 * Supervised fine-tuning of the embedded model on (prompt, completion) pairs: sequences
 * prompt-tokens completion [EOS], weighted cross-entropy on the completion and EOS only (token mean
 * over the batch), AdamW with warm-up + cosine schedule, a held-out loss measured periodically. The
 * prompt tokens come from the run's own prompt encoder (BOS + text, or a Hugging Face chat template),
 * so SFT and RL see identical prompts; with a LoRA adapter only the adapter trains.
 * `readSftJsonl` reads the JSONL data (fields prompt, completion); the `arbor sft` command itself
 * lives in cli/sft.ts.
 */
import { readFileSync } from 'node:fs';
import { DataError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import type { Datum } from '../types.js';
import { NanoModel } from '../model/model.js';
import { NanoTrainer } from './trainer.js';
import type { LoraAdapter } from '../model/lora.js';
import type { TextTokenizer } from '../types.js';
import type { NanoConfig } from '../model/config.js';

export interface SftExample {
  prompt: string;
  completion: string;
  /**
   * Multi-turn demonstrations (agent tasks): the completion as segments instead of `completion`.
   * A `policy` segment is trained on and followed by EOS (a turn ends there, as when sampling); an
   * `env` segment (an observation) is context only (weight 0), exactly as the RL learner masks it;
   * a `plain` one (tool output) is encoded without special-token parsing, as agent runs encode it.
   */
  segments?: Array<{ text: string; role: 'policy' | 'env'; plain?: boolean }>;
  /** Where it came from, for error messages (`file:line`). */
  source?: string;
  /**
   * Already token ids (a chat transcript rendered whole through the model's chat template, as the agent
   * gateway renders it): used as they are instead of encoding `prompt` and `completion`.
   */
  ids?: { prompt: number[]; completion: number[]; mask: number[] };
}

export interface SftOptions {
  steps: number;
  batchSize: number;
  learningRate: number;
  warmupSteps?: number;
  weightDecay?: number;
  /** Fraction of examples held out for the held-out loss. */
  heldOutFraction?: number;
  /** Evaluate the held-out loss every this many steps (and at the end). */
  evalEvery?: number;
  seed?: number;
  onProgress?: (p: SftProgress) => void;
  /** Prompt text → tokens (default: BOS + the text); the run's own encoder (e.g. the chat template). */
  encodePrompt?: (prompt: string) => number[];
  /** Train only this LoRA adapter (the model is frozen). */
  adapter?: LoraAdapter;
  /**
   * Compute the output head only at the completion's positions (prompts carry no loss; on a chat
   * template that is half of a batch). The loss and gradients are the same; default false.
   */
  weightedRowsOnly?: boolean;
}

export interface SftProgress {
  step: number;
  steps: number;
  loss: number;
  heldOutLoss?: number;
  tokensPerSecond: number;
  learningRate: number;
}

export interface SftResult {
  trainLoss: number[];
  heldOut: Array<{ step: number; loss: number }>;
  tokens: number;
  wallMs: number;
}

/** BOS (when the tokenizer has one) + the text: the prompt encoding without a chat template. */
export function plainPrompt(tokenizer: TextTokenizer): (prompt: string) => number[] {
  return (prompt) => [...(tokenizer.bos !== undefined ? [tokenizer.bos] : []), ...tokenizer.encode(prompt)];
}

/**
 * An example's token ids: the prompt, then the completion (each policy segment + EOS) and its loss
 * mask (1 on policy tokens and their EOS, 0 on observations): the ids and mask of the same episode's
 * rollout (test/run/transcripts.test.ts compares them).
 */
export function sftSequence(
  tokenizer: TextTokenizer,
  example: SftExample,
  encodePrompt = plainPrompt(tokenizer),
): { prompt: number[]; completion: number[]; mask: number[] } {
  if (example.ids) return example.ids;
  const prompt = encodePrompt(example.prompt);
  const completion: number[] = [];
  const mask: number[] = [];
  const segments: NonNullable<SftExample['segments']> = example.segments ?? [
    { text: example.completion, role: 'policy' },
  ];
  const encodeEnv = (text: string, plain?: boolean) =>
    plain && tokenizer.encodePlain ? tokenizer.encodePlain(text) : tokenizer.encode(text);
  for (const segment of segments) {
    const policy = segment.role === 'policy';
    const ids = policy ? [...tokenizer.encode(segment.text), tokenizer.eos] : encodeEnv(segment.text, segment.plain);
    completion.push(...ids);
    mask.push(...ids.map(() => (segment.role === 'policy' ? 1 : 0)));
  }
  return { prompt, completion, mask };
}

/** One SFT datum: loss on completion + EOS tokens. Weights are 1 (scaled per batch later). */
export function sftDatum(tokenizer: TextTokenizer, example: SftExample, encodePrompt = plainPrompt(tokenizer)): Datum {
  const { prompt, completion, mask: trained } = sftSequence(tokenizer, example, encodePrompt);
  const seq = prompt.concat(completion);
  // target t is sequence position t + 1: prompt positions get 0, completion positions their segment's weight
  const weights = seq.slice(1).map((_, t) => (t + 1 >= prompt.length ? trained[t + 1 - prompt.length] : 0));
  return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights };
}

function scaled(batch: Datum[]): Datum[] {
  const total = batch.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0) || 1;
  return batch.map((d) => ({ ...d, weights: d.weights.map((w) => w / total) }));
}

/**
 * SFT's fixed schedule: linear warm-up to `peak`, then cosine decay to 0.1·peak at `totalSteps`
 * (the RL learner's configurable schedules live in optimize/schedule.ts; the engine does not import
 * the Optimize stage).
 */
function warmupCosine(step: number, peak: number, warmupSteps: number, totalSteps: number): number {
  if (warmupSteps > 0 && step < warmupSteps) return (peak * (step + 1)) / warmupSteps;
  const progress = Math.min(1, (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps));
  return peak * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * progress)));
}

export async function runSft(
  model: NanoModel,
  tokenizer: TextTokenizer,
  examples: SftExample[],
  options: SftOptions,
): Promise<SftResult> {
  if (!examples.length) throw new DataError('sft: no examples');
  const rng = new Rng(options.seed ?? 0).fork('sft');
  const maxT = model.config.contextLength;
  const encoded = examples.map((e) => sftDatum(tokenizer, e, options.encodePrompt));
  const tooLong = encoded.findIndex((d) => d.inputTokens.length > maxT);
  if (tooLong >= 0) {
    const where = examples[tooLong].source ?? `example ${tooLong + 1} of ${examples.length}`;
    throw new DataError(
      `${where}: prompt + completion are ${encoded[tooLong].inputTokens.length + 1} tokens, over the model's contextLength ${maxT}`,
    );
  }
  const data = rng.shuffle(encoded);
  const nHeld = Math.min(Math.floor(data.length * (options.heldOutFraction ?? 0.05)), 256);
  const held = data.slice(0, nHeld);
  const train = data.slice(nHeld);
  const trainer = new NanoTrainer(model, { adapter: options.adapter, weightedRowsOnly: options.weightedRowsOnly });
  const warmupSteps = options.warmupSteps ?? Math.min(20, Math.floor(options.steps / 10));
  const result: SftResult = { trainLoss: [], heldOut: [], tokens: 0, wallMs: 0 };
  const started = Date.now();
  let cursor = 0;
  const evalEvery = options.evalEvery ?? Math.max(1, Math.floor(options.steps / 10));
  for (let step = 0; step < options.steps; step++) {
    const batch: Datum[] = [];
    for (let i = 0; i < options.batchSize; i++) {
      if (cursor >= train.length) {
        rng.shuffle(train);
        cursor = 0;
      }
      batch.push(train[cursor++]);
    }
    const out = await trainer.forwardBackward(scaled(batch), { kind: 'cross_entropy' });
    const lr = warmupCosine(step, options.learningRate, warmupSteps, options.steps);
    await trainer.optimStep({ learningRate: lr, weightDecay: options.weightDecay ?? 0.01, gradClipNorm: 1 });
    result.trainLoss.push(out.loss);
    result.tokens += batch.reduce((s, d) => s + d.inputTokens.length, 0);
    let heldOutLoss: number | undefined;
    if (held.length && ((step + 1) % evalEvery === 0 || step + 1 === options.steps)) {
      heldOutLoss = await trainer.logprobsLoss(scaled(held));
      result.heldOut.push({ step: step + 1, loss: heldOutLoss });
    }
    options.onProgress?.({
      step: step + 1,
      steps: options.steps,
      loss: out.loss,
      heldOutLoss,
      tokensPerSecond: result.tokens / ((Date.now() - started) / 1000 + 1e-9),
      learningRate: lr,
    });
  }
  await trainer.saveForSampler();
  result.wallMs = Date.now() - started;
  return result;
}

const SIZES: Record<string, Partial<NanoConfig>> = {
  tiny: { dModel: 64, nLayers: 2, nHeads: 4, dFF: 192 },
  small: { dModel: 128, nLayers: 4, nHeads: 4, dFF: 384 },
  medium: { dModel: 256, nLayers: 6, nHeads: 8, dFF: 768 },
};

export function modelSize(name: string): Partial<NanoConfig> {
  const s = SIZES[name];
  if (!s) throw new DataError(`unknown model size "${name}" (${Object.keys(SIZES).join(', ')})`);
  return s;
}

/**
 * Read a JSONL file of {prompt, completion} rows; errors name file:line and field. `readRow` reads the
 * rows it recognises (returns undefined for the others), e.g. chat transcripts (run/transcripts.ts).
 */
export function readSftJsonl(
  file: string,
  readRow?: (row: Record<string, unknown>, file: string, line: number) => SftExample | undefined,
): SftExample[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    throw new DataError(`${file}: cannot read (${(cause as Error).message})`, file, undefined, undefined, { cause });
  }
  const out: SftExample[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let row: Record<string, unknown>;
    try {
      row = JSON.parse(line);
    } catch (cause) {
      throw new DataError(`${file}:${i + 1}: invalid JSON`, file, i + 1, undefined, { cause });
    }
    const read = readRow && row && typeof row === 'object' ? readRow(row, file, i + 1) : undefined;
    if (read) return void out.push(read);
    for (const field of ['prompt', 'completion']) {
      if (typeof row[field] !== 'string')
        throw new DataError(`${file}:${i + 1}: field "${field}" must be a string`, file, i + 1, field);
    }
    out.push({ prompt: row.prompt as string, completion: row.completion as string, source: `${file}:${i + 1}` });
  });
  if (!out.length) throw new DataError(`${file}: no rows`, file);
  return out;
}
