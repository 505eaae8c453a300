/**
 * `arbor serve --checkpoint <dir> [options]`: a checkpoint over HTTP (serve/server.ts). The weights
 * must be finite (a checkpoint with NaN/Inf values is refused); `/update_weights_from_disk` loads only
 * from `--weights-root` directories (default: the checkpoint's parent directory); requests are bounded
 * by `--max-n`, `--max-batch-tokens`, `--max-concurrent` and the model's context length; completions
 * stop at the tokenizer's end-of-sequence token unless a request sets `ignore_eos`.
 */
import { dirname, resolve } from 'node:path';
import { ArborError } from '../core/errors.js';
import { loadCheckpoint } from '../engine/nano/checkpoint.js';
import { NanoSampler } from '../engine/nano/sampler.js';
import { NanoTrainer } from '../engine/nano/trainer.js';
import { DEFAULT_LIMITS } from '../serve/limits.js';
import { ArborServer } from '../serve/server.js';
import { nanoWeightLoader } from '../serve/weights.js';
import { helpText, parseCommand, type CommandSpec } from './args.js';

export const SERVE: CommandSpec = {
  name: 'serve',
  positionals: '',
  maxPositionals: 0,
  summary: 'Serve an embedded (nano) checkpoint over HTTP on 127.0.0.1: OpenAI /v1/completions, SGLang /generate and /update_weights_from_disk, the Tinker API under /api/v1/*, and /health.',
  flags: {
    checkpoint: { type: 'string', value: 'DIR', doc: 'the checkpoint directory to serve (required)' },
    port: { type: 'string', value: 'N', doc: 'TCP port (default 8000; 0 = any free port)' },
    host: { type: 'string', value: 'HOST', doc: 'address to listen on (default 127.0.0.1)' },
    name: { type: 'string', value: 'NAME', doc: 'model name for /v1/models and `model` (default arbor-nano)' },
    'state-dir': { type: 'string', value: 'DIR', doc: 'where Tinker save_weights keeps trainer states (default .arbor-serve-state)' },
    'weights-root': { type: 'string', value: 'DIR[,DIR...]', doc: 'directories /update_weights_from_disk may load from (default: the checkpoint\'s parent directory)' },
    'max-n': { type: 'string', value: 'N', doc: `largest n / num_samples of one request (default ${DEFAULT_LIMITS.maxN})` },
    'max-batch-tokens': { type: 'string', value: 'N', doc: `largest n × max_tokens of one request, answered 413 above (default ${DEFAULT_LIMITS.maxBatchTokens})` },
    'max-concurrent': { type: 'string', value: 'N', doc: `sampling requests running at once, answered 429 above (default ${DEFAULT_LIMITS.maxConcurrent})` },
    'slice-tokens': { type: 'string', value: 'N', doc: `decoded tokens per sampler call before /health and other requests get a turn (default ${DEFAULT_LIMITS.sliceTokens}; a request of n × max_tokens up to this is one call, exactly as the engine samples)` },
  },
};

export async function serveCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, SERVE);
  if (f.help) return void process.stdout.write(helpText(SERVE)), 0;
  const checkpoint = f.string('checkpoint');
  if (!checkpoint) throw new ArborError('serve: --checkpoint <dir> is required (arbor serve --help lists the options)');
  const port = f.number('port', 8000, { integer: true, min: 0, max: 65535 });
  const host = f.string('host') ?? '127.0.0.1';
  const limits = {
    maxN: f.number('max-n', DEFAULT_LIMITS.maxN, { integer: true, min: 1, max: 1_000_000 }),
    maxBatchTokens: f.number('max-batch-tokens', DEFAULT_LIMITS.maxBatchTokens, { integer: true, min: 1, max: 1e9 }),
    maxConcurrent: f.number('max-concurrent', DEFAULT_LIMITS.maxConcurrent, { integer: true, min: 1, max: 100_000 }),
    sliceTokens: f.number('slice-tokens', DEFAULT_LIMITS.sliceTokens, { integer: true, min: 1, max: 1e9 }),
  };
  const roots = (f.string('weights-root') ?? dirname(resolve(checkpoint))).split(',').filter(Boolean).map((r) => resolve(r));
  // loading refuses NaN or infinite weights, naming the tensors (engine/nano/checkpoint.ts)
  const { model, tokenizer } = await loadCheckpoint(checkpoint);
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: f.string('name') ?? 'arbor-nano',
    stateDir: f.string('state-dir') ?? '.arbor-serve-state',
    decode: (t) => tokenizer.decode(t, true),
    prepareWeights: nanoWeightLoader(model),
    weightsRoots: roots,
    limits,
    eosTokenId: tokenizer.eos,
  });
  const url = await server.listen(port, host);
  console.log(`arbor serve: ${checkpoint} (${model.parameterCount} parameters) at ${url}  [/v1/completions /generate /api/v1/* (Tinker SDK 0.3–0.24.1 JSON) /health]; weights from ${roots.join(', ')}`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
