/**
 * `arbor ui [runs-dir] [--port N]`: the live dashboard on 127.0.0.1 (Ctrl-C stops it). Given one run
 * directory instead of a runs dir, it serves that run's parent and prints the run's own page.
 */
import { existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { ArborError } from '../core/errors.js';
import { assetsBuilt, ASSET_DIR } from '../ui/server/assets.js';
import { startUiServer } from '../ui/server/server.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

/** The runs dir to serve and the page to open first. */
export function uiTarget(dir: string): { runsDir: string; page: string } {
  const abs = resolve(dir);
  if (existsSync(join(abs, 'config.resolved.yaml')))
    return { runsDir: dirname(abs), page: `#/run/${encodeURIComponent(basename(abs))}` };
  return { runsDir: dir, page: '' };
}

export const UI: CommandSpec = {
  name: 'ui',
  positionals: '[runs-dir]',
  maxPositionals: 1,
  summary: 'The live dashboard on 127.0.0.1 over the runs in runs-dir (default runs), or over one run directory.',
  flags: { port: { type: 'string', value: 'N', doc: 'port (8700; 0 = any free port)' } },
};

export async function uiCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, UI);
  if (f.help) return printHelp(UI);
  const port = f.number('port', 8700, { integer: true, min: 0, max: 65535 });
  const positional = f.positionals;
  if (!assetsBuilt())
    throw new ArborError(`the dashboard's assets are missing in ${ASSET_DIR}: run \`npm run build:ui\``);
  const { runsDir, page } = uiTarget(positional[0] ?? 'runs');
  const ui = await startUiServer({ runsDir, port });
  console.log(`arbor ui: ${ui.url}${page} (runs in ${runsDir}; Ctrl-C to stop)`);
  await new Promise<void>((resolveStop) => {
    const stop = () => resolveStop();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await ui.close();
  return 0;
}
