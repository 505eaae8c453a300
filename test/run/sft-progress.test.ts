/**
 * The warm-start SFT is visible where output is not a terminal (CI, pipes): `arbor train` prints a line
 * with the loss and the ETA at least every tenth of the SFT steps, and metrics.jsonl holds one `sft_step`
 * line per SFT step ahead of step 0, which the RL readers (RunDir.readMetrics, resume's truncation,
 * report.html, the dashboard's step charts) keep apart from the step lines. The held-out evaluations print
 * a line as each tenth of their samples is done. A cached warm start trains nothing and logs no SFT lines.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { Progress } from '../../src/run/progress.js';
import { RunDir, sftMetrics } from '../../src/run/rundir.js';
import { runCharts, SFT_CHART, X_AXES } from '../../src/ui/client/chart-defs.js';
import { metricSeries } from '../../src/ui/client/charts-panel.js';
import type { ReportData } from '../../src/ui/types.js';

const SFT_STEPS = 20;

const config = (root: string, out: string) => ({
  run: {
    ...{ name: 'sft-progress', outDir: join(root, out), seed: 1, steps: 1, promptsPerStep: 4 },
    ...{ evalEvery: 0, evalCount: 8, evalPassK: 0, checkpointEvery: 0, logTreesEvery: 0 },
  },
  task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
  model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
  sft: { steps: SFT_STEPS, batchSize: 8, examples: 100, checkpoint: join(root, 'sft') },
  sampling: { maxResponseTokens: 8 },
  generate: { kind: 'iid', groupSize: 2 },
});

/** The data report.html embeds. */
function reportData(runDir: string): ReportData {
  const html = readFileSync(join(runDir, 'report.html'), 'utf8');
  return JSON.parse(/<script type="application\/json" id="arbor-data">(.*?)<\/script>/s.exec(html)![1]) as ReportData;
}

test('arbor train into a pipe: SFT progress lines every tenth of the steps, SFT lines in metrics.jsonl', async () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-sft-progress-'));
  try {
    writeFileSync(join(root, 'config.yaml'), YAML.stringify(config(root, 'run')));
    const env = { ...process.env, CI: '' };
    const r = spawnSync(process.execPath, [resolve('bin/arbor.mjs'), 'train', join(root, 'config.yaml')], {
      encoding: 'utf8',
      timeout: 120_000,
      env,
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    // stderr is a pipe: no carriage returns, and a line with the loss and the ETA at least every tenth of the
    // steps (2, 4, ..., 20; a slow machine adds one every 10 s between them)
    assert.doesNotMatch(r.stderr, /\r/);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('warm-start: sft '));
    const shape = /^warm-start: sft (\d+)\/20 loss \d+\.\d{3}( held-out \d+\.\d{3})? \d+ tok\/s eta (\d+m)?\d+s$/;
    for (const l of lines) assert.match(l, shape);
    const steps = lines.map((l) => Number(shape.exec(l)![1]));
    for (const [i, step] of steps.entries()) assert.ok(step - (steps[i - 1] ?? 0) <= SFT_STEPS / 10, r.stderr);
    assert.equal(steps.at(-1), SFT_STEPS);
    assert.match(lines.at(-1)!, / eta 0s$/);
    // the tenths are where the SFT measures its held-out loss: those lines show it
    for (const step of [2, 4, 6, 8, 10, 12, 14, 16, 18, 20])
      assert.match(lines.find((l) => l.startsWith(`warm-start: sft ${step}/`)) ?? '', / held-out /, r.stderr);
    assert.match(r.stderr, /warm-start: done in .* s, train loss/);
    // the held-out evaluations (step 0 and the last step) report their 8 samples, a line each
    const evaluating = r.stderr.split('\n').filter((l) => l.startsWith('evaluating:'));
    for (const l of evaluating) assert.match(l, /^evaluating: \d\/8 samples eta (\d+m)?\d+s$/);
    assert.deepEqual(
      evaluating.map((l) => Number(/(\d)\/8/.exec(l)![1])),
      [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8],
      r.stderr,
    );

    const dir = new RunDir(join(root, 'run'));
    const raw = readFileSync(dir.metricsFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // the SFT's lines come first (it runs before step 0's evaluation), one per SFT step
    assert.deepEqual(
      raw.slice(0, SFT_STEPS).map((m) => m.sft_step),
      Array.from({ length: SFT_STEPS }, (_, i) => i + 1),
    );
    assert.deepEqual(
      raw.slice(SFT_STEPS).map((m) => m.step),
      [0, 1],
    );
    const sft = dir.readSftMetrics();
    assert.equal(sft.length, SFT_STEPS);
    for (const m of sft) {
      assert.equal(m.sft_steps, SFT_STEPS);
      assert.ok(Number.isFinite(m.sft_loss) && m.sft_loss > 0, `sft_loss ${m.sft_loss}`);
      assert.ok(m.sft_lr > 0 && m.sft_tokens_per_s > 0);
      assert.equal('step' in m, false);
    }
    assert.ok(sft[SFT_STEPS - 1].sft_loss < sft[0].sft_loss, 'the SFT loss falls');
    // held-out loss on every tenth of the steps (the run's SFT measures it there)
    assert.deepEqual(
      sft.filter((m) => m.sft_heldout_loss !== undefined).map((m) => m.sft_step),
      [2, 4, 6, 8, 10, 12, 14, 16, 18, 20],
    );
    // the RL readers see the step lines only
    assert.deepEqual(
      dir.readMetrics().map((m) => m.step),
      [0, 1],
    );
    // report.html embeds both; its charts: the SFT chart draws the SFT lines, the step charts the steps
    const data = reportData(dir.path);
    assert.equal(data.metrics.length, SFT_STEPS + 2);
    const charts = runCharts(data.metrics);
    assert.equal(charts.at(-1)?.id, 'sft');
    const sftLine = metricSeries(data.metrics, SFT_CHART.x!.key, SFT_CHART.metrics[0], 0, 'train', 'black');
    assert.deepEqual(
      sftLine.x,
      Array.from({ length: SFT_STEPS }, (_, i) => i + 1),
    );
    const reward = metricSeries(data.metrics, X_AXES.step.key, { key: 'reward_mean', label: 'r' }, 0, 'r', 'black');
    assert.deepEqual(reward.x, [1]);

    // a second run over the cached warm start trains nothing: no SFT lines, no SFT chart
    await train(parseConfig(config(root, 'again')), { quiet: true });
    const again = new RunDir(join(root, 'again'));
    assert.deepEqual(again.readSftMetrics(), []);
    assert.deepEqual(
      again.readMetrics().map((m) => m.step),
      [0, 1],
    );
    assert.equal(
      runCharts(reportData(again.path).metrics).some((c) => c.id === 'sft'),
      false,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('resume truncation keeps the SFT lines and the steps up to the checkpoint', () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-sft-truncate-'));
  try {
    const dir = new RunDir(root);
    const p = { steps: 2, loss: 3, learningRate: 0.01, tokensPerSecond: 100 };
    dir.appendMetrics(sftMetrics({ ...p, step: 1 }));
    dir.appendMetrics(sftMetrics({ ...p, step: 2, heldOutLoss: 2.5 }));
    for (const step of [0, 1, 2, 3]) dir.appendMetrics({ step, reward_mean: step / 10 });
    dir.truncateMetrics(1);
    assert.deepEqual(
      dir.readSftMetrics().map((m) => [m.sft_step, m.sft_heldout_loss]),
      [
        [1, undefined],
        [2, 2.5],
      ],
    );
    assert.deepEqual(
      dir.readMetrics().map((m) => m.step),
      [0, 1],
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

/** A stand-in for stderr that records what is written. */
function fakeStream(isTTY: boolean): NodeJS.WriteStream & { text: string } {
  const stream = { isTTY, text: '', write: (s: string) => ((stream.text += s), true) };
  return stream as unknown as NodeJS.WriteStream & { text: string };
}

test('Progress: off a terminal, a status update prints only when marked a milestone; on one it is rewritten', () => {
  const ci = process.env.CI;
  delete process.env.CI;
  try {
    const pipe = fakeStream(false);
    const off = new Progress(false, pipe);
    off.update('sft 1/20');
    off.update('sft 2/20', true);
    off.line('done');
    assert.equal(pipe.text, 'sft 2/20\ndone\n');
    const tty = fakeStream(true);
    const on = new Progress(false, tty);
    on.update('sft 1/20');
    on.update('sft 2/20', true);
    on.line('done');
    assert.equal(tty.text, '\rsft 1/20\rsft 2/20\r        \rdone\n');
    const quiet = fakeStream(false);
    new Progress(true, quiet).update('sft 2/20', true);
    assert.equal(quiet.text, '');
  } finally {
    if (ci !== undefined) process.env.CI = ci;
  }
});
