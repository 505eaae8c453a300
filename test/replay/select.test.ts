/**
 * Difficulty-targeted selection (`control.select: dots | vade`): from a window of candidates, DOTS samples
 * ∝ softmax(−|p̂ − target|/τ) (Gumbel-top-k, so τ → 0 is the nearest-first order), VADE keeps the
 * Thompson draws nearest the target; the Beta sampler has the right moments; a run with each trains,
 * logs the prompts passed over, and refuses to be combined with GRESO skipping.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/core/errors.js';
import { Rng, sampleBeta } from '../../src/core/rng.js';
import type { TaskItem } from '../../src/core/types.js';
import type { Posterior } from '../../src/control/prompt-stats.js';
import { selectByDifficulty, selectOptionsSchema, softmaxDraw } from '../../src/replay/select.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { tinyRun } from '../../testkit/reliability/tiny-run.js';

const items = (n: number): TaskItem[] =>
  Array.from({ length: n }, (_, i) => ({ id: `q${i}`, prompt: `q${i}`, answer: '' }));
const post = (a: number, b: number): Posterior => ({
  a,
  b,
  mean: a / (a + b),
  variance: (a * b) / ((a + b) ** 2 * (a + b + 1)),
});

test('Beta sampler: mean a/(a+b) and variance ab/((a+b)²(a+b+1)), also for shapes below 1', () => {
  for (const [a, b] of [
    [2, 5],
    [0.5, 0.5],
    [30, 3],
  ]) {
    const rng = new Rng(a * 100 + b);
    const xs = Array.from({ length: 20000 }, () => sampleBeta(rng, a, b));
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    const variance = xs.reduce((s, x) => s + (x - mean) ** 2, 0) / xs.length;
    const p = post(a, b);
    assert.ok(Math.abs(mean - p.mean) < 0.01, `Beta(${a},${b}) mean ${mean} vs ${p.mean}`);
    assert.ok(
      Math.abs(variance - p.variance) < 0.1 * p.variance + 1e-4,
      `Beta(${a},${b}) variance ${variance} vs ${p.variance}`,
    );
  }
});

test('softmaxDraw: at a tiny temperature the nearest-first order; otherwise draws ∝ exp(logit)', () => {
  const logits = [0.1, 0.4, 0.05, 0.3].map((d) => -d / 1e-3);
  assert.deepEqual(softmaxDraw(logits, 2, new Rng(1)), [2, 0]);
  const counts = [0, 0, 0, 0];
  const rng = new Rng(2);
  for (let i = 0; i < 4000; i++) counts[softmaxDraw([0, 0, 0, Math.log(3)], 1, rng)[0]]++;
  // p = [1, 1, 1, 3] / 6
  assert.ok(Math.abs(counts[3] / 4000 - 0.5) < 0.03 && Math.abs(counts[0] / 4000 - 1 / 6) < 0.03, `${counts}`);
});

test('dots keeps the candidates nearest 0.5 and passes over the rest; vade prefers uncertain prompts', () => {
  const pool = items(8);
  // posteriors: q0 solved, q1 near 0.5, q2 hopeless, q3 near 0.5, q4..7 solved
  const known: Record<string, Posterior> = {
    q0: post(20, 1),
    q1: post(6, 5),
    q2: post(1, 20),
    q3: post(5, 6),
    q4: post(20, 1),
    q5: post(30, 1),
    q6: post(25, 2),
    q7: post(18, 1),
  };
  let cursor = 0;
  const take = (n: number) => pool.slice(cursor, (cursor += n));
  const dots = selectOptionsSchema.parse({ kind: 'dots', window: 4 });
  const out = selectByDifficulty(take, 2, dots, (id) => known[id], new Rng(3));
  assert.deepEqual(out.items.map((i) => i.id).sort(), ['q1', 'q3']);
  assert.equal(out.passed, 6);
  const vade = selectOptionsSchema.parse({ kind: 'vade', window: 4 });
  const picks = new Map<string, number>();
  for (let s = 0; s < 200; s++) {
    cursor = 0;
    for (const i of selectByDifficulty(take, 2, vade, (id) => known[id], new Rng(s)).items)
      picks.set(i.id, (picks.get(i.id) ?? 0) + 1);
  }
  assert.ok((picks.get('q1') ?? 0) + (picks.get('q3') ?? 0) > 300, `vade picks: ${[...picks]}`);
  assert.ok((picks.get('q5') ?? 0) < 10);
  cursor = 0;
  assert.deepEqual(
    selectByDifficulty(take, 3, selectOptionsSchema.parse({ kind: 'sequential' }), () => post(1, 1), new Rng(1)),
    { items: pool.slice(0, 3), passed: 0 },
  );
});

test(
  'runs with dots and vade train and log the prompts passed over; select with GRESO is a config error',
  { timeout: 300_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-select-'));
    for (const kind of ['dots', 'vade']) {
      await train(parseConfig({ ...tinyRun(root, kind, { steps: 3 }), control: { select: { kind, window: 2 } } }), {
        quiet: true,
      });
      const ms = new RunDir(join(root, kind)).readMetrics().filter((m) => m.step > 0);
      assert.deepEqual(
        ms.map((m) => m.prompts_passed_over),
        [4, 4, 4],
        `${kind}: 4 prompts per step, a window of 8`,
      );
    }
    await assert.rejects(
      train(parseConfig({ ...tinyRun(root, 'both'), control: { select: { kind: 'dots' }, skip: { kind: 'greso' } } }), {
        quiet: true,
      }),
      (e: unknown) => e instanceof ConfigError && e.path === 'control.select.kind',
    );
  },
);
