/** `arbor config --print-defaults | --check <file>`. */
import { ArborError, ConfigError } from '../core/errors.js';
import { getTask } from '../tasks/index.js';
import { defaultsYaml, loadConfig } from '../run/config.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const CONFIG: CommandSpec = {
  name: 'config',
  positionals: '',
  maxPositionals: 0,
  summary: 'Print every option with its default and doc, or validate a config file as `train` would (task section included).',
  flags: {
    'print-defaults': { type: 'boolean', doc: 'every option, its default and its doc, as YAML' },
    check: { type: 'string', value: 'FILE', doc: 'validate FILE' },
  },
};

export async function configCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, CONFIG);
  if (f.help) return printHelp(CONFIG);
  if (f.bool('print-defaults')) {
    process.stdout.write(defaultsYaml());
    return 0;
  }
  const file = f.string('check');
  if (file) {
    const config = loadConfig(file);
    // the task section is validated by its task (names and option keys), as `train` would
    try {
      getTask(config.task.name, config.task.options);
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(`${file}: ${error.message}`, error.path, file, { cause: error });
      throw error;
    }
    console.log(`${file}: ok`);
    return 0;
  }
  throw new ArborError('usage: arbor config --print-defaults | arbor config --check <config.yaml>');
}
