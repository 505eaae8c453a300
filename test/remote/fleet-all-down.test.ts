/**
 * Issue 35, on one machine: `arbor train` (the CLI, in a child process) over two `arbor serve`
 * samplers, both killed with SIGKILL mid-run. With engine.sampler.unavailableSeconds 3 the run waits
 * for a server, then exits 1 within 3 + 10 s naming both servers and their last error; the samplers
 * are started again and `--resume` finishes the run from its last checkpoint.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { train } from '../../src/run/loop.js';
import { fleetRunConfig, portClosed, startServers, stepRows, tinyModel, waitFor } from '../../testkit/remote/fleet.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

test(
  'every sampler down: arbor train exits 1 within unavailableSeconds + 10 s naming them; the run resumes',
  { timeout: 120_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-fleet-down-'));
    const model = tinyModel(root);
    const { trainer, samplers, all } = await startServers(model, join(root, 'state'), 2);
    const file = join(root, 'run.yaml');
    const dir = join(root, 'run');
    writeFileSync(
      file,
      YAML.stringify(
        fleetRunConfig({
          name: 'run',
          root,
          model,
          trainer: trainer.url,
          samplers: samplers.map((s) => s.url),
          steps: 10,
          checkpointEvery: 2,
          unavailableSeconds: 3,
        }),
      ),
    );
    const child = spawn(process.execPath, ['bin/arbor.mjs', 'train', file], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(() => stepRows(dir).length >= 2, 60_000, 'step 2');
      await Promise.all(samplers.map((s) => s.kill9()));
      const killed = Date.now();
      const code = await exited;
      const seconds = (Date.now() - killed) / 1000;
      assert.equal(code, 1, output);
      assert.ok(seconds >= 3 && seconds <= 13, `exited ${seconds.toFixed(1)} s after the kill`);
      for (const s of samplers) assert.match(output, new RegExp(`${s.url}: .*ECONNREFUSED`), output);
      assert.match(output, /unavailableSeconds/);
      assert.match(output, /sampler: http:\/\/127\.0\.0\.1:\d+ is down/, 'the change was logged');
      // the run directory stays resumable
      await Promise.all(samplers.map((s) => s.start()));
      await train(undefined, { resume: dir, quiet: true });
      assert.deepEqual(
        stepRows(dir).map((m) => m.step),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      await Promise.all(all.map((p) => p.kill9()));
      for (const p of all) assert.ok(await portClosed(p.port), `port ${p.port} is closed`);
      rmSync(root, { recursive: true, force: true });
    }
  },
);
