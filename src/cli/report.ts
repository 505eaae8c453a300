/** `arbor report <run-dir>`: regenerate report.html from metrics.jsonl and trees. */
import { ArborError } from '../core/errors.js';
import { defaultTokenizer } from '../engine/build.js';
import { writeReport } from '../run/report.js';
import { RunDir } from '../run/rundir.js';

export async function reportCommand(argv: string[]): Promise<number> {
  const path = argv.find((a) => !a.startsWith('--'));
  if (!path) throw new ArborError('usage: arbor report <run-dir>');
  const dir = new RunDir(path);
  dir.readConfigText();
  console.log(writeReport(dir, defaultTokenizer()));
  return 0;
}
