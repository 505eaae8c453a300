/** `arbor train <config> | --resume <dir>`. */
import { ArborError } from '../core/errors.js';
import { loadConfig } from '../run/config.js';
import { train } from '../run/loop.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const TRAIN: CommandSpec = {
  name: 'train',
  positionals: '<config.yaml>',
  maxPositionals: 1,
  summary: 'Run RL (an SFT warm-start first when configured), or continue a run from its last usable checkpoint.',
  flags: {
    resume: { type: 'string', value: 'RUN_DIR', doc: 'continue the run in RUN_DIR (its own config.resolved.yaml; no config file)' },
    steps: { type: 'string', value: 'N', doc: 'replace run.steps (e.g. extend a resumed run)' },
    force: { type: 'boolean', doc: 'start over in an existing run directory' },
    quiet: { type: 'boolean', doc: 'no progress output' },
  },
};

export async function trainCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, TRAIN);
  if (f.help) return printHelp(TRAIN);
  const steps = f.number('steps', undefined, { integer: true, min: 0, max: 10_000_000 });
  const resume = f.string('resume');
  if (resume) {
    if (f.positionals.length) throw new ArborError(`train: --resume takes the run's own config; drop ${f.positionals[0]}`);
    if (f.bool('force')) throw new ArborError('train: --force starts over and --resume continues: give one of them');
    await train(undefined, { resume, steps, quiet: f.bool('quiet') });
    return 0;
  }
  const file = f.positionals[0];
  if (!file) throw new ArborError('usage: arbor train <config.yaml> [--steps N] [--force] | arbor train --resume <run-dir> (arbor train --help)');
  await train(loadConfig(file), { steps, force: f.bool('force'), quiet: f.bool('quiet') });
  return 0;
}
