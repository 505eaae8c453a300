/** `arbor eval --task <name> --checkpoint <dir>`: held-out accuracy (greedy and pass@k) of a checkpoint. */
import { ArborError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { loadCheckpoint } from '../engine/nano/checkpoint.js';
import { NanoSampler } from '../engine/nano/sampler.js';
import { evaluate } from '../run/evaluate.js';
import { getTask } from '../tasks/index.js';
import { flag, numberFlag } from './main.js';

export async function evalCommand(argv: string[]): Promise<number> {
  const taskName = flag(argv, 'task');
  const checkpoint = flag(argv, 'checkpoint');
  if (!taskName || !checkpoint) throw new ArborError('usage: arbor eval --task <name> --checkpoint <dir> [--count 200] [--k 4] [--seed 0] [--max-tokens 64] [--options JSON]');
  const options = flag(argv, 'options');
  const task = getTask(taskName, options ? JSON.parse(options) : {});
  const { model, tokenizer } = await loadCheckpoint(checkpoint);
  const seed = numberFlag(argv, 'seed', 0);
  const items = task.makeItems('test', numberFlag(argv, 'count', 200), seed);
  const k = numberFlag(argv, 'k', 4);
  const result = await evaluate(items, k, {
    sampler: new NanoSampler(model),
    encodePrompt: (item) => [tokenizer.bos, ...tokenizer.encode(item.prompt)],
    decode: (t) => tokenizer.decode(t),
    stopTokens: [tokenizer.eos],
    maxResponseTokens: numberFlag(argv, 'max-tokens', Math.min(128, model.config.contextLength - 32)),
    reward: task.reward,
    rng: new Rng(seed).fork('eval'),
  });
  console.log(JSON.stringify({ task: taskName, checkpoint, count: result.count, greedy_accuracy: result.greedyAccuracy, [`pass_at_${k}`]: result.passAtK, samples: result.samples }, null, 2));
  return 0;
}
