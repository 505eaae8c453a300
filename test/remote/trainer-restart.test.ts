/**
 * Issue 35, on one machine: the Tinker trainer (`arbor serve`) of a remote LoRA run is killed with
 * SIGKILL mid-run. The run stops with an error in bounded time; the trainer is started again on its port
 * with its state directory, and `--resume` finishes the run from the last checkpoint (step 2, while the
 * samplers already hold step 3's adapter). No optimizer step is applied twice (the trainer's own step
 * counter equals the run's step at every step), and the first resumed step's sampler log-probs, under
 * the adapter synced from the loaded state, equal the trainer's for the same tokens.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { portClosed, startServers, stepRows, tinyModel, waitFor, fleetRunConfig } from '../../testkit/remote/fleet.js';

test(
  'kill -9 the trainer mid-run, restart it and --resume: the run finishes, no step applied twice, resumed log-probs match',
  { timeout: 120_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-trainer-restart-'));
    const model = tinyModel(root);
    const { trainer, samplers, all } = await startServers(model, join(root, 'state'), 2);
    try {
      const config = fleetRunConfig({
        name: 'run',
        root,
        model,
        trainer: trainer.url,
        samplers: samplers.map((s) => s.url),
        steps: 8,
        checkpointEvery: 2,
      });
      const dir = join(root, 'run');
      const run = train(parseConfig(config), { quiet: true });
      run.catch(() => {});
      await waitFor(() => stepRows(dir).length >= 3, 60_000, 'step 3');
      await trainer.kill9();
      const killed = Date.now();
      await assert.rejects(run, (e: Error) => {
        assert.match(e.message, new RegExp(`${trainer.url}.*(did not answer|no longer knows)`));
        assert.match(e.message, /arbor train --resume/);
        return true;
      });
      assert.ok(Date.now() - killed < 15_000, `the run stopped ${Date.now() - killed} ms after the kill`);
      const before = stepRows(dir);
      // resumed while the trainer is still down: it says so (its checkpoints are not blamed)
      await assert.rejects(train(undefined, { resume: dir, quiet: true }), (e: Error) => {
        assert.match(e.message, new RegExp(`${trainer.url}: the trainer did not answer create_session`));
        assert.doesNotMatch(e.message, /no checkpoint loads/);
        return true;
      });
      await trainer.start();
      await train(undefined, { resume: dir, quiet: true });
      const rows = stepRows(dir);
      assert.deepEqual(
        rows.map((m) => m.step),
        [1, 2, 3, 4, 5, 6, 7, 8],
      );
      // the trainer's optimizer step counter moves by one per step, across the restart: nothing applied twice
      assert.deepEqual(
        rows.map((m) => m.trainer_step),
        [1, 2, 3, 4, 5, 6, 7, 8],
      );
      const state = JSON.parse(readFileSync(join(dir, 'checkpoints/step-8/engine/tinker-state.json'), 'utf8')) as {
        trainerStep: number;
        version: number;
        samplerPath: string;
      };
      assert.deepEqual([state.trainerStep, state.version], [8, 9]);
      assert.match(state.samplerPath, /^tinker:\/\/.*\/sampler_weights\/arbor-v9$/);
      // the first resumed step (3): the samplers held step 3's adapter from before the kill; the resume
      // loaded step 2's state and synced it, so sampler and trainer log-probs agree to float rounding
      const resumed = rows[2];
      assert.ok(before.length >= 3 && resumed.step === 3);
      assert.ok(
        resumed.logprob_gap_max <= 1e-5,
        `first resumed step: max |sampler − trainer| ${resumed.logprob_gap_max}`,
      );
      assert.ok(
        rows.every((m) => m.logprob_gap_max <= 1e-5),
        JSON.stringify(rows.map((m) => m.logprob_gap_max)),
      );
    } finally {
      await Promise.all(all.map((p) => p.kill9()));
      for (const p of all) assert.ok(await portClosed(p.port), `port ${p.port} is closed`);
      rmSync(root, { recursive: true, force: true });
    }
  },
);
