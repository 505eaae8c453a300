/**
 * The warm-start SFT's loss in a real browser (Debian's chromium through playwright-core, as
 * browser.test.ts): a run whose metrics.jsonl starts with `sft_step` lines gets a "Warm-start SFT
 * loss" chart against the SFT step, whatever the x axis; the step charts draw the step lines only and
 * the metric menu does not offer the SFT's keys; report.html from disk draws the same. A run without
 * SFT lines has no SFT chart. Skips, saying why, when no chromium is installed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { defaultTokenizer } from '../../src/engine/build.js';
import { writeReport } from '../../src/ui/report.js';
import { RunDir, sftMetrics } from '../../src/run/rundir.js';
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

/** 12 SFT steps (held-out loss at 4, 8 and 12), then step 0's evaluation and 3 RL steps. */
function metricsText(): string {
  const sft = Array.from({ length: 12 }, (_, i) =>
    sftMetrics({
      step: i + 1,
      steps: 12,
      loss: 3 - i / 6,
      heldOutLoss: (i + 1) % 4 === 0 ? 3.1 - i / 6 : undefined,
      learningRate: 0.01,
      tokensPerSecond: 1000,
    }),
  );
  const steps = [0, 1, 2, 3].map((step) => ({
    step,
    ...(step ? { reward_mean: 0.2 * step, accuracy: 0.2 * step } : { eval_greedy_acc: 0.1 }),
    tokens_decoded_total: 100 * step,
    wall_s: step,
  }));
  return [...sft, ...steps].map((m) => JSON.stringify(m) + '\n').join('');
}

let browser: Browser;
let page: Page;
let ui: UiServer;
let runs: { root: string; cleanup: () => void };
let withSft: string;
const errors: string[] = [];

before(async () => {
  if (skip) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  runs = tempRuns();
  withSft = writeLiveRun(runs.root, 'sft-run');
  writeFileSync(join(withSft, 'metrics.jsonl'), metricsText());
  writeLiveRun(runs.root, 'cached-run');
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
const SFT = 'Warm-start SFT loss';

/** The SFT chart: 12 train points + 3 held-out, x labelled "SFT step"; the reward chart: the 3 RL steps. */
async function checkCharts(): Promise<void> {
  await chart(SFT).locator('canvas').waitFor();
  assert.equal(await chart(SFT).getAttribute('data-series'), '2');
  assert.equal(await chart(SFT).getAttribute('data-points'), '15');
  assert.deepEqual(await chart(SFT).locator('.u-legend .u-label').allTextContents(), ['SFT step', 'train', 'held-out']);
  assert.equal(await chart('Train reward and accuracy').getAttribute('data-points'), '6');
}

test(
  'run charts: the SFT loss against the SFT step, whatever the x axis; the step charts unchanged',
  { skip },
  async () => {
    await page.goto(`${ui.url}#/run/sft-run/charts`);
    await checkCharts();
    const menu = await page.locator('select.add-metric option').allTextContents();
    assert.ok(!menu.some((o) => o.startsWith('sft_')), `the SFT's keys are not offered: ${menu.join(', ')}`);
    await page.locator('select.x-axis').selectOption('wall');
    await chart('Train reward and accuracy').locator('canvas').waitFor();
    await checkCharts();
    await page.screenshot({ path: join(ARTIFACTS, 'sft-chart.png') });
    assert.deepEqual(errors, []);
  },
);

test('a run without SFT lines (a cached warm start) has no SFT chart', { skip }, async () => {
  await page.goto(`${ui.url}#/run/cached-run/charts`);
  await chart('Train reward and accuracy').locator('canvas').waitFor();
  assert.equal(await chart(SFT).count(), 0);
});

test('report.html: the SFT chart, opened from disk', { skip }, async () => {
  const file = writeReport(new RunDir(withSft), defaultTokenizer());
  await page.goto(`file://${file}`);
  await checkCharts();
  assert.deepEqual(errors, []);
});
