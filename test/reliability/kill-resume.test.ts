/**
 * Issue 17, crash safety end to end: `arbor train` killed with SIGKILL at random moments and inside
 * the writes of a checkpoint's state.json and model.safetensors, then resumed, ends with exactly the
 * metrics of an uninterrupted run (a bounded number of trials, each a few seconds).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killResumeTrials } from '../../testkit/reliability/kill-resume.js';

test(
  'killed at 2 random moments and inside 3 checkpoint writes, every resumed run equals the uninterrupted one',
  { timeout: 600_000 },
  async () => {
    const report = await killResumeTrials(mkdtempSync(join(tmpdir(), 'arbor-kill-')), {
      random: 2,
      targets: [
        { file: 'state.json', at: 2 },
        { file: join('engine', 'model.safetensors'), at: 1 },
        { file: 'store.jsonl', at: 3 },
      ],
      seed: 7,
    });
    assert.equal(report.trials, 5);
    assert.equal(
      report.details.slice(2).filter((d) => d.killed).length,
      3,
      'each targeted write was reached and killed the run',
    );
    assert.ok(report.killed >= 4, `the kills found the runs still running (${report.killed} of 5)`);
    assert.deepEqual(
      report.details.filter((d) => !d.identical),
      [],
    );
    assert.equal(report.identical, 5);
  },
);
