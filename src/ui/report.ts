/**
 * report.html: one self-contained file (no network: the styles, uPlot and the dashboard's chart and
 * tree components are inlined from build/ui/, the data embedded as JSON) showing the run's summary,
 * the same charts as `arbor ui` (x axis switch, smoothing, hover values; every metric on its own
 * scale) and the tree explorer over the latest logged step's trees. `lineChart` draws a static SVG
 * chart for the benches' outputs.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { treeFromJSON, type RolloutTree } from '../core/tree.js';
import { formatTicks, niceTicks } from './client/ticks.js';
import { assetsBuilt, readAsset } from './server/assets.js';
import { treeView, type Decoder } from './server/tree-model.js';
import type { MetricsRow, ReportData } from './types.js';

/**
 * What the report reads of a run directory and writes into it (run/rundir.ts's `RunDir` is one): the
 * report knows run directories by their files, not by the code that writes them.
 */
export interface ReportRunDir {
  path: string;
  /** metrics.jsonl's lines: the RL steps' (they have `step`) and the warm-start SFT's. */
  readLines(): object[];
  writeText(name: string, text: string): void;
}

interface Series {
  name: string;
  color: string;
  points: Array<[number, number]>;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

/** A static line chart as an SVG string (benches); ticks are round values with distinct labels. */
export function lineChart(title: string, xLabel: string, series: Series[], width = 460, height = 260): string {
  const pad = { l: 60, r: 12, t: 28, b: 40 };
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  if (!all.length)
    return `<svg class="chart" width="${width}" height="${height}"><text x="10" y="20">${escapeHtml(title)}: no data</text></svg>`;
  const xt = niceTicks(Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0])));
  const yt = niceTicks(Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1])));
  const span = (t: number[], vals: number[]): [number, number] => {
    const lo = Math.min(t[0], ...vals);
    const hi = Math.max(t[t.length - 1], ...vals);
    return lo === hi ? [lo - 0.5, hi + 0.5] : [lo, hi];
  };
  const [x0, x1] = span(
    xt,
    all.map((p) => p[0]),
  );
  const [y0, y1] = span(
    yt,
    all.map((p) => p[1]),
  );
  const X = (x: number) => pad.l + ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (y: number) => height - pad.b - ((y - y0) / (y1 - y0)) * (height - pad.t - pad.b);
  const parts: string[] = [
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
  ];
  parts.push(
    `<text x="${width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="600">${escapeHtml(title)}</text>`,
  );
  formatTicks(yt).forEach((label, i) =>
    parts.push(
      `<line x1="${pad.l}" x2="${width - pad.r}" y1="${Y(yt[i])}" y2="${Y(yt[i])}" stroke="#e5e7eb"/>` +
        `<text x="${pad.l - 4}" y="${Y(yt[i]) + 4}" text-anchor="end" font-size="10">${label}</text>`,
    ),
  );
  formatTicks(xt).forEach((label, i) =>
    parts.push(`<text x="${X(xt[i])}" y="${height - pad.b + 14}" text-anchor="middle" font-size="10">${label}</text>`),
  );
  parts.push(
    `<text x="${width / 2}" y="${height - 6}" text-anchor="middle" font-size="11">${escapeHtml(xLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (!pts.length) return;
    parts.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ')}"/>`,
    );
    if (pts.length < 40)
      for (const [x, y] of pts)
        parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    parts.push(
      `<rect x="${pad.l + 8 + i * 130}" y="${pad.t - 2}" width="10" height="3" fill="${s.color}"/>` +
        `<text x="${pad.l + 22 + i * 130}" y="${pad.t + 2}" font-size="10">${escapeHtml(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('');
}

function numericRows(metrics: object[]): MetricsRow[] {
  return metrics.map((m) =>
    Object.fromEntries(
      Object.entries(m).filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1])),
    ),
  );
}

/** JSON safe inside a <script> element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

export interface ReportTrees {
  step: number;
  trees: RolloutTree[];
  /** Which tokenizer decoded them (shown in the explorer). */
  tokenizer?: string;
}

/**
 * The report page over metrics.jsonl's lines (the RL steps', and the warm-start SFT's when the run
 * trained it). Throws when the ui assets are not built (`npm run build:ui`).
 */
export function buildReport(
  metrics: object[],
  treesIn: ReportTrees | RolloutTree[] | null,
  decoder: Decoder,
  summary: Record<string, unknown> | undefined,
  title: string,
): string {
  const steps = metrics.map((m) => ('step' in m ? (m.step as number) : 0));
  const trees = Array.isArray(treesIn) ? { step: Math.max(0, ...steps), trees: treesIn } : treesIn;
  const data: ReportData = {
    title,
    metrics: numericRows(metrics),
    summary,
    trees:
      trees && trees.trees.length
        ? {
            step: trees.step,
            tokenizer: trees.tokenizer ?? "the run's tokenizer",
            trees: trees.trees.map((t) => treeView(t, decoder)),
          }
        : null,
  };
  const script = readAsset('report.js').replace(/<\/script/gi, '<\\/script');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>${readAsset('app.css').replace(/<\/style/gi, '<\\/style')}</style></head>
<body><div id="app"><h1>${escapeHtml(title)}</h1><p>This report draws its charts and trees with JavaScript (inlined in this file; nothing is fetched).</p></div>
<script type="application/json" id="arbor-data">${scriptJson(data)}</script>
<script>${script}</script>
</body></html>
`;
}

/** The latest step's trees (at most `maxTrees`), or null when none were logged. */
export function latestTrees(dir: Pick<ReportRunDir, 'path'>, maxTrees: number): ReportTrees | null {
  const treesDir = join(dir.path, 'trees');
  if (!existsSync(treesDir)) return null;
  const files = readdirSync(treesDir)
    .map((f) => /^step-(\d+)\.jsonl$/.exec(f))
    .filter((m): m is RegExpExecArray => !!m)
    .sort((a, b) => Number(b[1]) - Number(a[1]));
  if (!files.length) return null;
  const file = join(treesDir, files[0][0]);
  const trees = readFileSync(file, 'utf8')
    .split('\n')
    .map((l, i) => [l, i] as const)
    .filter(([l]) => l.trim())
    .slice(0, maxTrees)
    .map(([l, i]) => treeFromJSON(l, `${file}:${i + 1}`));
  return { step: Number(files[0][1]), trees };
}

/** Regenerate report.html of a run directory; skipped with a note when the ui assets are missing. */
export function writeReport(
  dir: ReportRunDir,
  decoder: Decoder,
  options: { maxTrees?: number; tokenizer?: string } = {},
): string {
  const out = join(dir.path, 'report.html');
  if (!assetsBuilt()) {
    console.error(
      `arbor: report.html not written: the ui assets are not built (npm run build:ui), then run \`arbor report ${dir.path}\``,
    );
    return out;
  }
  const metrics = dir.readLines();
  const trees = latestTrees(dir, options.maxTrees ?? 32);
  if (trees && options.tokenizer) trees.tokenizer = options.tokenizer;
  const summaryFile = join(dir.path, 'summary.json');
  const summary = existsSync(summaryFile)
    ? (JSON.parse(readFileSync(summaryFile, 'utf8')) as Record<string, unknown>)
    : undefined;
  dir.writeText('report.html', buildReport(metrics, trees, decoder, summary, `Arbor run: ${dir.path}`));
  return out;
}
