/**
 * The browser assets of `arbor ui` and report.html, built at install time by scripts/build-ui.mjs
 * into build/ui/ (app.js, report.js, app.css: the client code bundled with uPlot). Nothing is fetched
 * from the network at run time.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArborError } from '../../core/errors.js';

export const ASSET_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../build/ui');
export const ASSET_NAMES = ['app.js', 'report.js', 'app.css'] as const;
export type AssetName = (typeof ASSET_NAMES)[number];

export function assetsBuilt(): boolean {
  return ASSET_NAMES.every((n) => existsSync(join(ASSET_DIR, n)));
}

const cache = new Map<string, string>();

export function readAsset(name: AssetName): string {
  const file = join(ASSET_DIR, name);
  if (!existsSync(file))
    throw new ArborError(`${file} is missing: build the ui assets with \`npm run build:ui\` (npm install does it)`);
  const hit = cache.get(file);
  if (hit !== undefined) return hit;
  const text = readFileSync(file, 'utf8');
  cache.set(file, text);
  return text;
}

export const INDEX_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Arbor runs</title><link rel="stylesheet" href="/app.css"></head>
<body><div id="app"><p class="muted">Loading…</p></div><script src="/app.js"></script></body></html>
`;
