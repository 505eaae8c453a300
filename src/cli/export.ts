/** `arbor export <run-dir> --to sft.jsonl`: verified trajectories of a run as SFT rows (replay/export.ts). */
import { existsSync } from 'node:fs';
import { ArborError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { exportRun } from '../replay/export.js';
import { runTokenizer } from '../ui/server/tokenizer.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const EXPORT: CommandSpec = {
  name: 'export',
  positionals: '<run-dir>',
  minPositionals: 1,
  maxPositionals: 1,
  summary: 'Write the verified trajectories of a run\'s logged trees as JSONL rows {prompt, completion, reward, step, item}, deduplicated; `arbor sft --data` reads them back.',
  flags: {
    to: { type: 'string', value: 'FILE', doc: 'the JSONL file to write (required)' },
    'min-reward': { type: 'string', value: 'R', doc: 'keep leaves with reward ≥ R (default: the correct ones)' },
    force: { type: 'boolean', doc: 'replace an existing file' },
  },
};

export async function exportCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, EXPORT);
  if (f.help) return printHelp(EXPORT);
  const to = f.string('to');
  if (!to) throw new ArborError('export: --to FILE is required (arbor export --help)');
  if (existsSync(to) && !f.bool('force')) throw new ArborError(`export: ${to} exists; pass --force to replace it`);
  const minReward = f.number('min-reward', undefined, { min: -1e6, max: 1e6 });
  const runDir = f.positionals[0];
  const tokenizer = runTokenizer(runDir);
  const { rows, counts } = exportRun(runDir, { minReward, decode: (t) => tokenizer.decoder.decode(t) });
  writeFileAtomic(to, rows.map((r) => JSON.stringify(r) + '\n').join(''));
  console.log(`${to}: ${counts.kept} rows from ${counts.leaves} leaves in ${counts.files} tree files (${counts.duplicates} duplicates, ${counts.filtered} below the filter, ${counts.excluded} hinted/unfinished/error left out); decoded with ${tokenizer.source}`);
  return 0;
}
