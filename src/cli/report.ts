/** `arbor report <run-dir>`: regenerate report.html from metrics.jsonl and trees, decoded with the run's own tokenizer. */
import { ArborError } from '../core/errors.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';
import { writeReport } from '../ui/report.js';
import { RunDir } from '../run/rundir.js';
import { assetsBuilt, ASSET_DIR } from '../ui/server/assets.js';
import { runTokenizer } from '../ui/server/tokenizer.js';

export const REPORT: CommandSpec = {
  name: 'report',
  positionals: '<run-dir>',
  minPositionals: 1,
  maxPositionals: 1,
  summary: "Regenerate report.html of a run from its metrics and trees, decoded with the run's own tokenizer.",
  flags: {},
};

export async function reportCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, REPORT);
  if (f.help) return printHelp(REPORT);
  const path = f.positionals[0];
  const dir = new RunDir(path);
  dir.readConfigText();
  if (!assetsBuilt()) throw new ArborError(`the report's assets are missing in ${ASSET_DIR}: run \`npm run build:ui\``);
  const tokenizer = runTokenizer(path);
  console.log(writeReport(dir, tokenizer.decoder, { tokenizer: tokenizer.source }));
  return 0;
}
