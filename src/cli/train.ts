/** `arbor train <config> | --resume <dir>`. */
import { ArborError } from '../core/errors.js';
import { loadConfig } from '../run/config.js';
import { train } from '../run/loop.js';
import { flag, numberFlag } from './args.js';

export async function trainCommand(argv: string[]): Promise<number> {
  const resume = flag(argv, 'resume');
  const stepsFlag = flag(argv, 'steps');
  const steps = stepsFlag === undefined ? undefined : numberFlag(argv, 'steps', 0);
  const positional = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && ['--resume', '--steps'].includes(argv[i - 1])));
  if (resume) {
    await train(undefined, { resume, steps, quiet: argv.includes('--quiet') });
    return 0;
  }
  const file = positional[0];
  if (!file) throw new ArborError('usage: arbor train <config.yaml> [--steps N] [--force] | arbor train --resume <run-dir>');
  const config = loadConfig(file);
  await train(config, { steps, force: argv.includes('--force'), quiet: argv.includes('--quiet') });
  return 0;
}
