/**
 * Reward components (`reward/<name>` in metrics.jsonl) in the data the dashboard plots: which charts a
 * run gets (a "Reward components" chart with a line per component; one chart per component when
 * comparing), the points of each line, the rows the server sends and the data report.html embeds.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { defaultTokenizer } from '../../src/engine/build.js';
import { buildReport } from '../../src/ui/report.js';
import { RunDir } from '../../src/run/rundir.js';
import { CHARTS, compareCharts, rewardComponentKeys, runCharts, X_AXES } from '../../src/ui/client/chart-defs.js';
import { metricSeries } from '../../src/ui/client/charts-panel.js';
import { assetsBuilt } from '../../src/ui/server/assets.js';
import { startUiServer, type UiServer } from '../../src/ui/server/server.js';
import type { MetricsChunk, MetricsRow, ReportData } from '../../src/ui/types.js';
import { tempRuns, writeLiveRun } from '../../testkit/ui/helpers.js';

/** Step 0 (evaluation only), then three steps; `format` is missing at step 2, `judge` appears at step 3. */
const ROWS: MetricsRow[] = [
  { step: 0, eval_greedy_acc: 0.2, tokens_decoded_total: 0, wall_s: 0 },
  { step: 1, reward_mean: 0.5, 'reward/correct': 0.25, 'reward/format': 0.75, tokens_decoded_total: 100, wall_s: 1 },
  { step: 2, reward_mean: 0.6, 'reward/correct': 0.5, tokens_decoded_total: 200, wall_s: 2 },
  {
    step: 3,
    reward_mean: 0.7,
    'reward/correct': 0.5,
    'reward/format': 1,
    'reward/judge': 0.3,
    tokens_decoded_total: 300,
    wall_s: 3,
  },
];

test('charts: reward/<name> rows give "Reward components", a line per component, after the reward chart', () => {
  assert.deepEqual(rewardComponentKeys(ROWS), ['reward/correct', 'reward/format', 'reward/judge']);
  const defs = runCharts(ROWS);
  assert.equal(defs.length, CHARTS.length + 1);
  assert.deepEqual(
    defs.slice(0, 3).map((d) => d.id),
    ['reward', 'reward-components', 'heldout'],
  );
  assert.deepEqual(defs[1].title, 'Reward components');
  assert.deepEqual(defs[1].metrics, [
    { key: 'reward/correct', label: 'correct' },
    { key: 'reward/format', label: 'format' },
    { key: 'reward/judge', label: 'judge' },
  ]);
  // no components logged (older runs, the fixtures): the fixed charts only
  assert.deepEqual(runCharts([{ step: 1, reward_mean: 0.5, 'reward/': 1 }]), CHARTS);
});

test('charts: the lines carry each step that logged the component (a missing step is a gap, not 0)', () => {
  const def = runCharts(ROWS).find((d) => d.id === 'reward-components')!;
  const lines = def.metrics.map((m) => metricSeries(ROWS, X_AXES.step.key, m, 0, m.label, 'black'));
  assert.deepEqual(
    lines.map((l) => [l.label, l.x, l.y]),
    [
      ['correct', [1, 2, 3], [0.25, 0.5, 0.5]],
      ['format', [1, 3], [0.75, 1]],
      ['judge', [3], [0.3]],
    ],
  );
  const byTokens = metricSeries(ROWS, X_AXES.tokens.key, def.metrics[1], 0, 'format', 'black');
  assert.deepEqual(byTokens.x, [100, 300]);
});

test('compare: one chart per reward component any run logged, after the fixed metrics', () => {
  const defs = compareCharts([...ROWS, { step: 1, 'reward/length_penalty': -0.1 }]);
  assert.deepEqual(
    defs.slice(-4).map((d) => [d.id, d.title, d.metrics.length]),
    [
      ['reward/correct', 'train reward/correct', 1],
      ['reward/format', 'train reward/format', 1],
      ['reward/judge', 'train reward/judge', 1],
      ['reward/length_penalty', 'train reward/length_penalty', 1],
    ],
  );
  assert.equal(defs[0].id, 'eval_greedy_acc');
});

let ui: UiServer;
let runs: { root: string; cleanup: () => void };
let run: string;

before(async () => {
  runs = tempRuns();
  run = writeLiveRun(runs.root, 'components-run');
  writeFileSync(join(run, 'metrics.jsonl'), ROWS.map((l) => JSON.stringify(l) + '\n').join(''));
  ui = await startUiServer({ runsDir: runs.root, pollMs: 100 });
});
after(async () => {
  await ui?.close();
  runs?.cleanup();
});

function getJson<T>(path: string): Promise<T> {
  const { port } = new URL(ui.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body) as T) : reject(new Error(body))));
    });
    req.on('error', reject);
    req.end();
  });
}

test('server: the metrics API sends the reward/<name> fields the charts read', async () => {
  const chunk = await getJson<MetricsChunk>('/api/runs/components-run/metrics');
  assert.deepEqual(chunk.rows, ROWS);
  assert.deepEqual(runCharts(chunk.rows)[1].metrics.length, 3);
});

test(
  'report.html: embeds the reward/<name> rows, and its script draws "Reward components"',
  { skip: assetsBuilt() ? false : 'ui assets not built (npm run build:ui)' },
  () => {
    const html = buildReport(new RunDir(run).readMetrics(), null, defaultTokenizer(), undefined, 'components');
    const json = /<script type="application\/json" id="arbor-data">(.*?)<\/script>/s.exec(html)![1];
    const data = JSON.parse(json) as ReportData;
    assert.deepEqual(data.metrics, ROWS);
    assert.deepEqual(rewardComponentKeys(data.metrics), ['reward/correct', 'reward/format', 'reward/judge']);
    assert.match(html, /Reward components/, 'report.js bundles the reward-components chart');
  },
);
