#!/usr/bin/env node
// Bundles the `arbor ui` client (src/ui/client, with uPlot) into build/ui/: app.js (the dashboard),
// report.js (report.html's inline script) and app.css (uPlot's stylesheet + ours). Run by
// `npm run build` (and so by npm install/ci here, npm pack and npm test; consumers get the files in the
// tarball); the server and report.html read only these files, each written aside and renamed into place.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'build/ui');
mkdirSync(out, { recursive: true });
const started = Date.now();
const partial = (file) => join(out, `${file}.${process.pid}.partial`);
for (const [entry, file] of [
  ['app.ts', 'app.js'],
  ['report-entry.ts', 'report.js'],
]) {
  await build({
    entryPoints: [join(root, 'src/ui/client', entry)],
    outfile: partial(file),
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['chrome110', 'firefox110', 'safari16'],
    legalComments: 'none',
    logLevel: 'warning',
  });
  renameSync(partial(file), join(out, file));
}
const require = createRequire(import.meta.url);
const uplotCss = readFileSync(join(dirname(require.resolve('uplot')), 'uPlot.min.css'), 'utf8');
writeFileSync(partial('app.css'), uplotCss + '\n' + readFileSync(join(root, 'src/ui/client/style.css'), 'utf8'));
renameSync(partial('app.css'), join(out, 'app.css'));
console.log(`ui assets built in ${Date.now() - started} ms → ${out}`);
