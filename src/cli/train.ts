/**
 * `arbor train <config> | --resume <dir>`. Every exit closes the run's environments (MCP server
 * processes) and engine: an error at load or in a step (train() closes them before it rejects), and
 * SIGINT/SIGTERM, which abort the run, wait for that close, and exit with 130 (143). A second signal
 * exits at once. The run's modules load after the arguments parse, so `--help` and a bad flag answer at once.
 */
import { ArborError } from '../core/errors.js';
import type { train, TrainOptions } from '../run/loop.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const TRAIN: CommandSpec = {
  name: 'train',
  positionals: '<config.yaml>',
  maxPositionals: 1,
  summary: 'Run RL (an SFT warm-start first when configured), or continue a run from its last usable checkpoint.',
  flags: {
    resume: {
      type: 'string',
      value: 'RUN_DIR',
      doc: 'continue the run in RUN_DIR (its own config.resolved.yaml; no config file)',
    },
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
    if (f.positionals.length)
      throw new ArborError(`train: --resume takes the run's own config; drop ${f.positionals[0]}`);
    if (f.bool('force')) throw new ArborError('train: --force starts over and --resume continues: give one of them');
    return trainClosingOnSignal(undefined, { resume, steps, quiet: f.bool('quiet') });
  }
  const file = f.positionals[0];
  if (!file) {
    throw new ArborError(
      'usage: arbor train <config.yaml> [--steps N] [--force] | arbor train --resume <run-dir> (arbor train --help)',
    );
  }
  const { loadConfig } = await import('../run/config.js');
  return trainClosingOnSignal(loadConfig(file), { steps, force: f.bool('force'), quiet: f.bool('quiet') });
}

/** Exit codes of a run stopped by a signal (128 + the signal's number, as shells report it). */
const SIGNAL_EXIT: Record<'SIGINT' | 'SIGTERM', number> = { SIGINT: 130, SIGTERM: 143 };

/** train() with SIGINT/SIGTERM aborting it; after the close it aborted, the process exits with 130/143. */
async function trainClosingOnSignal(config: Parameters<typeof train>[0], options: TrainOptions): Promise<number> {
  const controller = new AbortController();
  let received: keyof typeof SIGNAL_EXIT | undefined;
  const handlers = (['SIGINT', 'SIGTERM'] as const).map((signal) => {
    const handler = (): void => {
      if (received) process.exit(SIGNAL_EXIT[signal]);
      received = signal;
      console.error(`arbor: ${signal}: closing the environments and the engine (again to exit at once)`);
      controller.abort();
    };
    process.on(signal, handler);
    return () => process.off(signal, handler);
  });
  try {
    const { train } = await import('../run/loop.js');
    await train(config, { ...options, signal: controller.signal });
    return 0;
  } catch (error) {
    if (!received) throw error;
    console.error(`arbor: ${received}: the run stopped; its environments and engine are closed`);
    // the step in progress may still hold the event loop: what it opened is closed, so leave now
    return process.exit(SIGNAL_EXIT[received]);
  } finally {
    for (const off of handlers) off();
  }
}
