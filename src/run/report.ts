/**
 * report.html: a self-contained page (inline SVG, no scripts or external assets) built from a run
 * directory: reward and held-out accuracy against step and against cumulative tokens decoded, the
 * prefix-reuse ratio, loss/entropy/clip fraction, the summary, and a rendering of a few rollout
 * trees from the latest trees/step-N.jsonl (segments as text, leaves coloured by reward).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { treeFromJSON, type RolloutTree } from '../core/tree.js';
import type { RunDir, StepMetrics } from './rundir.js';

interface Decoder {
  decode(tokens: number[]): string;
}

interface Series {
  name: string;
  color: string;
  points: Array<[number, number]>;
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

/** A line chart as an SVG string. */
export function lineChart(title: string, xLabel: string, series: Series[], width = 460, height = 260): string {
  const pad = { l: 52, r: 12, t: 28, b: 40 };
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  if (!all.length) return `<svg class="chart" width="${width}" height="${height}"><text x="10" y="20">${escapeHtml(title)}: no data</text></svg>`;
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) [y0, y1] = [y0 - 0.5, y1 + 0.5];
  const X = (x: number) => pad.l + ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (y: number) => height - pad.b - ((y - y0) / (y1 - y0)) * (height - pad.t - pad.b);
  const ticks = (a: number, b: number) => Array.from({ length: 5 }, (_, i) => a + ((b - a) * i) / 4);
  const fmt = (v: number) => (Math.abs(v) >= 1000 ? `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)}k` : Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(0));
  const parts: string[] = [`<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  parts.push(`<text x="${width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="600">${escapeHtml(title)}</text>`);
  for (const v of ticks(y0, y1)) parts.push(`<line x1="${pad.l}" x2="${width - pad.r}" y1="${Y(v)}" y2="${Y(v)}" stroke="#e5e7eb"/><text x="${pad.l - 4}" y="${Y(v) + 4}" text-anchor="end" font-size="10">${fmt(v)}</text>`);
  for (const v of ticks(x0, x1)) parts.push(`<text x="${X(v)}" y="${height - pad.b + 14}" text-anchor="middle" font-size="10">${fmt(v)}</text>`);
  parts.push(`<text x="${width / 2}" y="${height - 6}" text-anchor="middle" font-size="11">${escapeHtml(xLabel)}</text>`);
  series.forEach((s, i) => {
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (!pts.length) return;
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ')}"/>`);
    if (pts.length < 40) for (const [x, y] of pts) parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    parts.push(`<rect x="${pad.l + 8 + i * 130}" y="${pad.t - 2}" width="10" height="3" fill="${s.color}"/><text x="${pad.l + 22 + i * 130}" y="${pad.t + 2}" font-size="10">${escapeHtml(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('');
}

function series(metrics: StepMetrics[], x: string, y: string, name: string, color: string): Series {
  return { name, color, points: metrics.filter((m) => typeof m[y] === 'number' && typeof m[x] === 'number').map((m) => [m[x] as number, m[y] as number]) };
}

/** Nested boxes: each node shows its segment text; leaves are coloured by reward. */
export function renderTree(tree: RolloutTree, decoder: Decoder): string {
  const node = (id: string): string => {
    const n = tree.nodes[id];
    const text = escapeHtml(decoder.decode(n.tokens)) || '∅';
    const leaf = n.children.length === 0 && n.parent !== null;
    const r = n.reward;
    const bg = leaf ? (r === undefined ? '#f3f4f6' : r > 0.5 ? '#dcfce7' : '#fee2e2') : '#fff';
    const badge = leaf ? ` <span class="badge">${r === undefined ? '' : `r=${r.toFixed(2)}`} ${n.finishReason ?? ''}</span>` : '';
    const kids = n.children.length ? `<div class="kids">${n.children.map(node).join('')}</div>` : '';
    return `<div class="node" style="background:${bg}"><code>${text}</code>${badge}${kids}</div>`;
  };
  return `<div class="tree"><div class="tree-title">${escapeHtml(tree.id)} · item ${escapeHtml(tree.itemId)}</div>${node('0')}</div>`;
}

export function buildReport(metrics: StepMetrics[], trees: RolloutTree[], decoder: Decoder, summary: Record<string, unknown> | undefined, title: string): string {
  const steps = metrics.filter((m) => m.step > 0);
  const charts = [
    lineChart('Reward and accuracy vs step', 'step', [series(steps, 'step', 'reward_mean', 'train reward', COLORS[0]), series(metrics, 'step', 'eval_greedy_acc', 'held-out greedy acc', COLORS[1]), series(metrics, 'step', 'eval_pass_at_k', 'held-out pass@k', COLORS[2])]),
    lineChart('Reward and accuracy vs tokens decoded', 'tokens decoded (cumulative)', [series(steps, 'tokens_decoded_total', 'reward_mean', 'train reward', COLORS[0]), series(metrics, 'tokens_decoded_total', 'eval_greedy_acc', 'held-out greedy acc', COLORS[1]), series(metrics, 'tokens_decoded_total', 'eval_pass_at_k', 'held-out pass@k', COLORS[2])]),
    lineChart('Prefix reuse ratio per step', 'step', [series(steps, 'step', 'prefix_reuse_ratio', 'reused / (reused + computed)', COLORS[3])]),
    lineChart('Tokens decoded per step', 'step', [series(steps, 'step', 'tokens_decoded', 'decoded', COLORS[0]), series(steps, 'step', 'prefix_tokens_reused', 'prefix reused', COLORS[3])]),
    lineChart('Loss, entropy, clip fraction', 'step', [series(steps, 'step', 'loss', 'loss', COLORS[0]), series(steps, 'step', 'entropy', 'entropy', COLORS[2]), series(steps, 'step', 'clip_fraction', 'clip fraction', COLORS[4])]),
    lineChart('Held-out greedy accuracy vs wall time', 'seconds since the first step', [series(metrics, 'wall_s', 'eval_greedy_acc', 'held-out greedy acc', COLORS[1])]),
    lineChart('Staleness and trainer/sampler gap', 'step', [series(steps, 'step', 'staleness_mean', 'mean token staleness (versions)', COLORS[3]), series(steps, 'step', 'staleness_max', 'max staleness', COLORS[4]), series(steps, 'step', 'logprob_gap', 'mean |behaviour − current| log-prob', COLORS[0])]),
    lineChart('Seconds per stage', 'step', [
      { name: 'generate', color: COLORS[0], points: steps.map((m) => [m.step, ((m.ms_generate as number) ?? 0) / 1000]) },
      { name: 'train', color: COLORS[1], points: steps.map((m) => [m.step, ((m.ms_train as number) ?? 0) / 1000]) },
      { name: 'score', color: COLORS[2], points: steps.map((m) => [m.step, ((m.ms_score as number) ?? 0) / 1000]) },
      { name: 'learner waiting for rollouts', color: COLORS[3], points: steps.map((m) => [m.step, ((m.ms_wait as number) ?? 0) / 1000]) },
    ]),
  ];
  const summaryRows = summary ? Object.entries(summary).map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(4)) : String(v))}</td></tr>`).join('') : '';
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#111}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #e5e7eb;border-radius:6px;background:#fff}
table{border-collapse:collapse;margin:12px 0}th,td{border:1px solid #e5e7eb;padding:4px 8px;text-align:left;font-size:13px}
.tree{border:1px solid #d1d5db;border-radius:6px;padding:8px;margin:12px 0;overflow-x:auto}
.tree-title{font-weight:600;margin-bottom:6px}
.node{border-left:3px solid #9ca3af;margin:3px 0 3px 6px;padding:2px 6px}
.kids{margin-left:14px}
code{white-space:pre-wrap;font-size:12px}
.badge{font-size:11px;color:#374151;margin-left:6px}
</style></head><body>
<h1>${escapeHtml(title)}</h1>
${summaryRows ? `<h2>Summary</h2><table>${summaryRows}</table>` : ''}
<h2>Curves</h2><div class="charts">${charts.join('\n')}</div>
<h2>Rollout trees</h2>
${trees.length ? trees.map((t) => renderTree(t, decoder)).join('\n') : '<p>No trees logged.</p>'}
</body></html>
`;
}

/** Regenerate report.html of a run directory. */
export function writeReport(dir: RunDir, decoder: Decoder, maxTrees = 4): string {
  const metrics = dir.readMetrics();
  const treesDir = join(dir.path, 'trees');
  let trees: RolloutTree[] = [];
  if (existsSync(treesDir)) {
    const files = readdirSync(treesDir).map((f) => /^step-(\d+)\.jsonl$/.exec(f)).filter((m): m is RegExpExecArray => !!m).sort((a, b) => Number(b[1]) - Number(a[1]));
    if (files.length) {
      const file = join(treesDir, files[0][0]);
      trees = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).slice(0, maxTrees).map((l, i) => treeFromJSON(l, `${file}:${i + 1}`));
    }
  }
  const summaryFile = join(dir.path, 'summary.json');
  const summary = existsSync(summaryFile) ? (JSON.parse(readFileSync(summaryFile, 'utf8')) as Record<string, unknown>) : undefined;
  const html = buildReport(metrics, trees, decoder, summary, `Arbor run: ${dir.path}`);
  dir.writeText('report.html', html);
  return join(dir.path, 'report.html');
}
