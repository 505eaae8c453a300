/**
 * progressCounter: "<label> <done>/<total> <detail> eta <time>" with the ETA from the mean time per unit
 * since the first tick, a milestone at every tenth of the total, at the end and every `everySeconds`
 * between; Progress.counter prints the milestones as lines off a terminal and nothing under --quiet.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatSeconds, progressCounter } from '../../src/core/progress-count.js';
import { Progress } from '../../src/run/progress.js';

test('progressCounter: ETA from the time per unit since the first tick; milestones at tenths and every N s', () => {
  let clock = 1000;
  const seen: Array<[string, boolean]> = [];
  const tick = progressCounter((text, milestone) => seen.push([text, milestone]), 'sft', 20, {
    startedAt: 0,
    everySeconds: 30,
    now: () => clock,
  });
  // step 1 took 1 s from the start: 19 s left
  tick(1, 'loss 2.000');
  // steps 2..20 at 2 s each (the first step's own rate is left behind)
  for (let step = 2; step <= 20; step++) {
    clock += 2000;
    tick(step);
  }
  assert.deepEqual(seen[0], ['sft 1/20 loss 2.000 eta 19s', false]);
  assert.deepEqual(seen[1], ['sft 2/20 eta 36s', true]);
  assert.equal(seen[9][0], 'sft 10/20 eta 20s');
  assert.deepEqual(seen[19], ['sft 20/20 eta 0s', true]);
  assert.deepEqual(
    seen.filter(([, m]) => m).map(([t]) => Number(/ (\d+)\//.exec(t)![1])),
    [2, 4, 6, 8, 10, 12, 14, 16, 18, 20],
  );
});

test('progressCounter: a slow stretch gets a milestone every everySeconds between the tenths', () => {
  let clock = 0;
  const milestones: number[] = [];
  const tick = progressCounter((text, m) => m && milestones.push(Number(/ (\d+)\//.exec(text)![1])), 'x', 1000, {
    everySeconds: 5,
    now: () => clock,
  });
  for (let done = 1; done <= 1000; done++) {
    clock += done <= 50 ? 1000 : 1; // the first 50 units take 1 s each, the rest 1 ms
    tick(done);
  }
  // every 5 s during the slow start, then the tenths
  assert.deepEqual(
    milestones,
    [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000],
  );
  // totals under ten: every unit is a tenth
  const small: boolean[] = [];
  const few = progressCounter((_, m) => small.push(m), 'y', 3, { now: () => 0 });
  [1, 2, 3].forEach((d) => few(d));
  assert.deepEqual(small, [true, true, true]);
});

test('formatSeconds rounds before splitting minutes', () => {
  assert.equal(formatSeconds(0.4), '0s');
  assert.equal(formatSeconds(59.6), '1m00s');
  assert.equal(formatSeconds(119.7), '2m00s');
  assert.equal(formatSeconds(187), '3m07s');
  assert.equal(formatSeconds(Infinity), '?');
});

/** A stand-in for stderr that records what is written. */
function fakeStream(isTTY: boolean): NodeJS.WriteStream & { text: string } {
  const stream = { isTTY, text: '', write: (s: string) => ((stream.text += s), true) };
  return stream as unknown as NodeJS.WriteStream & { text: string };
}

test('Progress.counter: lines at the milestones off a terminal, rewritten on one, nothing when quiet', () => {
  const ci = process.env.CI;
  delete process.env.CI;
  try {
    const run = (progress: Progress) => {
      const tick = progress.counter('eval', 4, { now: () => 0 });
      [1, 2, 3, 4].forEach((d) => tick(d, 'samples'));
    };
    const pipe = fakeStream(false);
    run(new Progress(false, pipe));
    assert.equal(pipe.text, ['1', '2', '3', '4'].map((d) => `eval ${d}/4 samples eta 0s\n`).join(''));
    const tty = fakeStream(true);
    run(new Progress(false, tty));
    assert.equal(tty.text, ['1', '2', '3', '4'].map((d) => `\reval ${d}/4 samples eta 0s`).join(''));
    const quiet = fakeStream(false);
    run(new Progress(true, quiet));
    assert.equal(quiet.text, '');
  } finally {
    if (ci !== undefined) process.env.CI = ci;
  }
});
