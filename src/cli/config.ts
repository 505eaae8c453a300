/** `arbor config --print-defaults | --check <file>`. */
import { ArborError } from '../core/errors.js';
import { defaultsYaml, loadConfig } from '../run/config.js';
import { flag } from './args.js';

export async function configCommand(argv: string[]): Promise<number> {
  if (argv.includes('--print-defaults')) {
    process.stdout.write(defaultsYaml());
    return 0;
  }
  const file = flag(argv, 'check');
  if (file) {
    loadConfig(file);
    console.log(`${file}: ok`);
    return 0;
  }
  throw new ArborError('usage: arbor config --print-defaults | arbor config --check <config.yaml>');
}
