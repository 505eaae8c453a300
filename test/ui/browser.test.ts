/**
 * `arbor ui` in a real browser (Debian's chromium through playwright-core): the run list with live
 * refresh, charts with data points and hover values, two runs overlaid, the tree explorer (collapse,
 * distinct node kinds, click a leaf → its decoded path), and report.html opened from disk.
 * Screenshots go to test-artifacts/ui/. Skips, saying why, when no chromium is installed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { defaultTokenizer } from '../../src/engine/build.js';
import { writeReport } from '../../src/ui/report.js';
import { RunDir } from '../../src/run/rundir.js';
import { startUiServer, type UiServer } from '../../src/ui/server/server.js';
import { appendMetrics, ARTIFACTS, tempRuns, tok, writeBigRun, writeLiveRun } from '../../testkit/ui/helpers.js';

const CHROMIUM = [
  process.env.ARBOR_CHROMIUM,
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
].find((p): p is string => !!p && existsSync(p));
const skip = CHROMIUM
  ? false
  : 'no chromium found (apt-get install chromium, or set ARBOR_CHROMIUM): browser tests skipped';
if (skip) console.log(`# ${skip}`);

let browser: Browser;
let page: Page;
let ui: UiServer;
let runs: { root: string; cleanup: () => void };
let live: string;
const errors: string[] = [];

before(async () => {
  if (skip) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  runs = tempRuns();
  live = writeLiveRun(runs.root);
  ui = await startUiServer({ runsDir: runs.root, pollMs: 200 });
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu'],
    timeout: 30_000,
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (e) => errors.push(e.message));
});
after(async () => {
  await browser?.close();
  await ui?.close();
  runs?.cleanup();
});

const shot = (name: string, fullPage = false) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage });

test('run list: every run with its status, task, generator and headline; live refresh', { skip }, async () => {
  await page.goto(ui.url);
  await page.locator('tr.run-row').nth(2).waitFor();
  assert.deepEqual(
    await page.locator('tr.run-row').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.run)),
    ['live-run', 'tiny-iid', 'tiny-treepo'],
  );
  const treepo = page.locator('tr[data-run="tiny-treepo"]');
  assert.equal(await treepo.locator('.status').textContent(), 'finished');
  assert.match((await treepo.textContent())!, /arith.*treepo.*30 \/ 30.*45\.0% →/);
  assert.equal(await page.locator('tr[data-run="live-run"] .status').textContent(), 'running');
  assert.match((await page.locator('tr[data-run="live-run"]').textContent())!, /1 \/ 30/);
  appendMetrics(live, 2);
  appendMetrics(live, 3);
  await page.locator('tr[data-run="live-run"]', { hasText: '3 / 30' }).waitFor({ timeout: 5000 });
  await shot('run-list');
  assert.deepEqual(errors, []);
});

test('run charts: data points drawn, hover shows values, x axis switch', { skip }, async () => {
  await page.goto(`${ui.url}#/run/tiny-treepo/charts`);
  const reward = page.locator('.chart[data-title="Train reward and accuracy"]');
  await reward.locator('canvas').waitFor();
  assert.equal(await reward.getAttribute('data-points'), '60'); // reward + accuracy, 30 steps
  assert.equal(await page.locator('.chart[data-title="Held-out accuracy"]').getAttribute('data-points'), '12'); // 3 series × 4 evaluations
  assert.notEqual(await page.locator('.chart[data-title="Loss"]').getAttribute('data-points'), '0');
  const box = (await reward.locator('.u-over').boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const legend = await reward.locator('.u-legend .u-value').allTextContents();
  assert.ok(
    legend.slice(1).some((v) => /^-?\d/.test(v)),
    `hover values: ${legend.join(' | ')}`,
  );
  await shot('run-charts');
  await page.selectOption('select.x-axis', 'tokens');
  await page
    .locator('.chart[data-title="Train reward and accuracy"] .u-legend', { hasText: 'tokens decoded' })
    .waitFor();
  assert.equal(await page.locator('.chart[data-title="Train reward and accuracy"]').getAttribute('data-points'), '60');
});

test('compare: two runs overlaid on the same axes, with their summaries', { skip }, async () => {
  await page.goto(ui.url);
  await page.locator('tr[data-run="tiny-iid"] input.pick').check();
  await page.locator('tr[data-run="tiny-treepo"] input.pick').check();
  await page.locator('button.compare-button').click();
  const chart = page.locator('.chart[data-title="held-out greedy accuracy"]');
  await chart.locator('canvas').waitFor();
  assert.equal(await chart.getAttribute('data-series'), '2');
  assert.equal(await chart.getAttribute('data-points'), '8');
  const names = await chart.locator('.u-legend .u-label').allTextContents();
  assert.ok(names.includes('tiny-iid') && names.includes('tiny-treepo'), names.join(', '));
  assert.deepEqual(await page.locator('table.summary thead th').allTextContents(), ['', 'tiny-iid', 'tiny-treepo']);
  await shot('compare', true);
});

test('tree explorer: a real tree; click a leaf to read its decoded path', { skip }, async () => {
  await page.goto(`${ui.url}#/run/tiny-treepo/trees`);
  await page.locator('.tree-svg .node.leaf').first().waitFor();
  assert.equal(await page.locator('select.tree-step').inputValue(), '30');
  const raw = JSON.parse(readFileSync(join(runs.root, 'tiny-treepo/trees/step-30.jsonl'), 'utf8').split('\n')[0]);
  const leafIds = Object.values(raw.nodes as Record<string, { id: string; children: string[] }>)
    .filter((n) => !n.children.length)
    .map((n) => n.id);
  assert.equal(await page.locator('.tree-svg .node.leaf').count(), leafIds.length);
  const target = leafIds[leafIds.length - 1];
  await page.locator(`.tree-svg .node.leaf[data-id="${target}"] circle`).first().click();
  const path: string[] = [];
  for (let id: string | null = target; id !== null; id = raw.nodes[id].parent)
    path.unshift(tok.decode(raw.nodes[id].tokens, true));
  assert.equal(await page.locator('.leaf-panel .path-text').textContent(), path.join(''));
  assert.match((await page.locator('.leaf-panel table.components').textContent())!, /correct/);
  assert.equal(await page.locator('.tree-svg .edge.on-path').count(), raw.nodes[target].depth);
  await shot('tree-explorer');
  await page.selectOption('select.tree-step', '10');
  await page.locator('.tree-title', { hasText: 's10r0p0' }).waitFor();
  const raw10 = readFileSync(join(runs.root, 'tiny-treepo/trees/step-10.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { id: string; itemId: string });
  const wanted = raw10[raw10.length - 1];
  await page.fill('input.tree-filter', wanted.itemId);
  await page.press('input.tree-filter', 'Enter');
  await page.locator('.tree-title', { hasText: wanted.id }).waitFor();
  assert.ok((await page.locator('select.tree-pick option').count()) >= 1);
});

test(
  'tree explorer: pruned, aborted, error and environment nodes are distinct; collapse and zoom',
  { skip },
  async () => {
    await page.goto(`${ui.url}#/run/live-run/trees`);
    await page.locator('.tree-svg .node.leaf').first().waitFor();
    assert.equal(await page.locator('.node.finish-error .error-cross').count(), 1);
    assert.equal(await page.locator('.node.finish-abort .abort-ring').count(), 1);
    assert.equal(await page.locator('.node.env rect').count(), 1);
    assert.match((await page.locator('.tree-title').textContent())!, /2 paths \(9 tokens\) pruned/);
    assert.match((await page.locator('.node[data-id="0.0"] .node-label').textContent())!, /entropy 0\.91/);
    await page.locator('.node[data-id="0.0.0"] circle').click();
    assert.match((await page.locator('.leaf-panel table.segments').textContent())!, /0\.75/); // the advantage it received
    await shot('tree-kinds');
    const leaves = await page.locator('.tree-svg .node.leaf').count();
    await page.locator('.node[data-id="0.0"] circle').click();
    assert.equal(await page.locator('.tree-svg .node.leaf').count(), leaves - 2);
    assert.equal(await page.locator('.tree-svg .node.collapsed').count(), 1);
    const y = async (id: string) =>
      Number(/,([-\d.]+)\)/.exec((await page.locator(`.node[data-id="${id}"]`).getAttribute('transform'))!)![1]);
    const gap = (await y('0.1')) - (await y('0'));
    await page.locator('.tree-tools button', { hasText: '+' }).click();
    const zoomed = (await y('0.1')) - (await y('0'));
    assert.ok(Math.abs(zoomed / gap - 1.25) < 0.01, `zoom spread rows ×${zoomed / gap}`);
  },
);

test('report.html: self-contained, same charts and tree explorer, opened from disk', { skip }, async () => {
  const dir = new RunDir(join(runs.root, 'tiny-treepo'));
  const file = writeReport(dir, defaultTokenizer());
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(`file://${file}`);
  await page.locator('.chart canvas').first().waitFor();
  assert.equal(await page.locator('.chart[data-title="Train reward and accuracy"]').getAttribute('data-points'), '60');
  assert.equal(await page.locator('.chart[data-title="Loss"]').count(), 1);
  assert.equal(await page.locator('.chart[data-title="Entropy"]').count(), 1);
  await page.locator('.tree-svg .node.leaf circle').first().click();
  assert.ok((await page.locator('.leaf-panel .path-text').textContent())!.length > 5);
  assert.deepEqual(
    requests.filter((u) => !u.startsWith('file://')),
    [],
  );
  await shot('report', true);
  assert.deepEqual(errors, []);
});

test('large runs: 5,000-step charts and a 512-leaf tree render in the browser', { skip }, async () => {
  writeBigRun(runs.root, 5000, 9);
  let t = performance.now();
  await page.goto(`${ui.url}#/run/big-run/charts`);
  await page.locator('.chart[data-title="Train reward and accuracy"] canvas').waitFor();
  const chartsMs = performance.now() - t;
  assert.equal(
    await page.locator('.chart[data-title="Train reward and accuracy"]').getAttribute('data-points'),
    '5001',
  ); // reward at steps 0..5000 (no accuracy column)
  t = performance.now();
  await page.goto(`${ui.url}#/run/big-run/trees`);
  await page.locator('.tree-svg .node.collapsed').nth(63).waitFor({ state: 'attached' });
  assert.equal(await page.locator('.tree-svg .node.collapsed').count(), 64); // opened folded at depth 6: 64 ends of 8 leaves each
  await shot('big-tree-folded');
  await page.locator('.tree-svg .node.collapsed path').first().click();
  assert.equal(await page.locator('.tree-svg .node.leaf').count(), 8);
  await page.locator('.tree-tools button', { hasText: 'expand all' }).click();
  await page.locator('.tree-svg .node.leaf').nth(511).waitFor({ state: 'attached' });
  const treeMs = performance.now() - t;
  assert.equal(await page.locator('.tree-svg .node.leaf').count(), 512);
  await shot('big-tree');
  console.log(
    `# big run in the browser: charts of 5,001 steps ${chartsMs.toFixed(0)} ms, 512-leaf tree ${treeMs.toFixed(0)} ms`,
  );
  assert.ok(chartsMs < 8000 && treeMs < 8000);
});
