/**
 * Reward components in a real browser (Debian's chromium through playwright-core, as browser.test.ts):
 * a run's "Reward components" chart with a line per `reward/<name>`, a component that first appears in
 * a live run grows the chart, one chart per component when comparing, and report.html from disk.
 * Skips, saying why, when no chromium is installed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { defaultTokenizer } from '../../src/engine/build.js';
import { writeReport } from '../../src/ui/report.js';
import { RunDir } from '../../src/run/rundir.js';
import { startUiServer, type UiServer } from '../../src/ui/server/server.js';
import { ARTIFACTS, tempRuns, writeLiveRun } from '../../testkit/ui/helpers.js';

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

const line = (step: number, components: Record<string, number>) =>
  JSON.stringify({ step, reward_mean: 0.5, tokens_decoded_total: 100 * step, wall_s: step, ...components }) + '\n';

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
  live = writeLiveRun(runs.root, 'components-run');
  writeFileSync(
    join(live, 'metrics.jsonl'),
    line(1, { 'reward/correct': 0.25, 'reward/format': 0.75 }) + line(2, { 'reward/correct': 0.5 }),
  );
  const other = writeLiveRun(runs.root, 'components-other');
  writeFileSync(join(other, 'metrics.jsonl'), line(1, { 'reward/correct': 0.1 }) + line(2, { 'reward/correct': 0.2 }));
  ui = await startUiServer({ runsDir: runs.root, pollMs: 100 });
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

const chart = (title: string) => page.locator(`.chart[data-title="${title}"]`);

test('run charts: a line per reward component; a new component grows the chart live', { skip }, async () => {
  await page.goto(`${ui.url}#/run/components-run/charts`);
  await chart('Reward components').locator('canvas').waitFor();
  assert.equal(await chart('Reward components').getAttribute('data-series'), '2');
  assert.equal(await chart('Reward components').getAttribute('data-points'), '3'); // correct ×2, format ×1
  assert.deepEqual(await chart('Reward components').locator('.u-legend .u-label').allTextContents(), [
    'step',
    'correct',
    'format',
  ]);
  const menu = await page.locator('select.add-metric option').allTextContents();
  assert.ok(!menu.some((o) => o.startsWith('reward/')), `charted components are not offered again: ${menu.join(', ')}`);
  writeFileSync(
    join(live, 'metrics.jsonl'),
    line(3, { 'reward/correct': 1, 'reward/format': 1, 'reward/judge': 0.3 }),
    {
      flag: 'a',
    },
  );
  await page.locator('.chart[data-title="Reward components"][data-series="3"]').waitFor({ timeout: 5000 });
  assert.equal(await chart('Reward components').getAttribute('data-points'), '6');
  await page.screenshot({ path: join(ARTIFACTS, 'reward-components.png') });
  assert.deepEqual(errors, []);
});

test('compare: one chart per reward component, one line per run', { skip }, async () => {
  await page.goto(`${ui.url}#/compare/components-run,components-other`);
  await chart('train reward/correct').locator('canvas').waitFor();
  assert.equal(await chart('train reward/correct').getAttribute('data-series'), '2');
  assert.equal(await chart('train reward/correct').getAttribute('data-points'), '5');
  assert.equal(await chart('train reward/judge').getAttribute('data-series'), '1');
});

test('report.html: the reward components chart, opened from disk', { skip }, async () => {
  const file = writeReport(new RunDir(live), defaultTokenizer());
  await page.goto(`file://${file}`);
  await chart('Reward components').locator('canvas').waitFor();
  assert.equal(await chart('Reward components').getAttribute('data-series'), '3');
  assert.equal(await chart('Reward components').getAttribute('data-points'), '6');
  assert.deepEqual(errors, []);
});
