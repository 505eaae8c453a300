/** `arbor serve --checkpoint <dir> [--port 8000] [--host 127.0.0.1]`: a checkpoint over HTTP. */
import { ArborError } from '../core/errors.js';
import { loadArena, loadCheckpoint } from '../engine/nano/checkpoint.js';
import { NanoSampler } from '../engine/nano/sampler.js';
import { NanoTrainer } from '../engine/nano/trainer.js';
import { ArborServer } from '../serve/server.js';
import { join } from 'node:path';
import { flag, numberFlag } from './args.js';

export async function serveCommand(argv: string[]): Promise<number> {
  const checkpoint = flag(argv, 'checkpoint');
  if (!checkpoint) throw new ArborError('usage: arbor serve --checkpoint <dir> [--port 8000] [--host 127.0.0.1] [--name arbor-nano] [--state-dir .arbor-serve-state]');
  const { model, tokenizer } = await loadCheckpoint(checkpoint);
  const sampler = new NanoSampler(model);
  const trainer = new NanoTrainer(model);
  const server = new ArborServer({
    sampler,
    trainer,
    modelName: flag(argv, 'name') ?? 'arbor-nano',
    stateDir: flag(argv, 'state-dir') ?? '.arbor-serve-state',
    decode: (t) => tokenizer.decode(t, true),
    reloadWeights: async (path) => {
      loadArena(model.params, join(path, 'model.safetensors'));
      model.weightVersion++;
      return model.weightVersion;
    },
  });
  const url = await server.listen(numberFlag(argv, 'port', 8000), flag(argv, 'host') ?? '127.0.0.1');
  console.log(`arbor serve: ${checkpoint} (${model.parameterCount} parameters) at ${url}  [/v1/completions /generate /api/v1/* /health]`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
