/** `arbor config --print-defaults | --check <file>`. */
import { ArborError, ConfigError } from '../core/errors.js';
import { getTask } from '../tasks/index.js';
import { defaultsYaml, loadConfig } from '../run/config.js';
import { flag } from './args.js';

export async function configCommand(argv: string[]): Promise<number> {
  if (argv.includes('--print-defaults')) {
    process.stdout.write(defaultsYaml());
    return 0;
  }
  const file = flag(argv, 'check');
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
