/** `arbor serve --checkpoint <dir> [--port 8000] [--host 127.0.0.1]`: a checkpoint over HTTP. */
import { ArborError } from '../core/errors.js';
import { buildServingEngine } from '../engine/build.js';
import { ArborServer } from '../serve/server.js';
import { flag, numberFlag } from './args.js';

export async function serveCommand(argv: string[]): Promise<number> {
  const checkpoint = flag(argv, 'checkpoint');
  if (!checkpoint) throw new ArborError('usage: arbor serve --checkpoint <dir> [--port 8000] [--host 127.0.0.1] [--name arbor-nano] [--state-dir .arbor-serve-state]');
  const { sampler, trainer, decode, reloadWeights, description } = await buildServingEngine(checkpoint);
  const server = new ArborServer({
    sampler,
    trainer,
    modelName: flag(argv, 'name') ?? 'arbor-nano',
    stateDir: flag(argv, 'state-dir') ?? '.arbor-serve-state',
    decode,
    reloadWeights,
  });
  const url = await server.listen(numberFlag(argv, 'port', 8000), flag(argv, 'host') ?? '127.0.0.1');
  console.log(`arbor serve: ${description} at ${url}  [/v1/completions /generate /api/v1/* (Tinker SDK 0.3–0.24.1 JSON) /health]`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
