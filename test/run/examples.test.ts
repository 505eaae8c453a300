import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/run/config.js';

test('every example config validates, and the async example differs from the main job only in run mode and correction', () => {
  const files = readdirSync('examples').filter((f) => f.endsWith('.yaml'));
  assert.ok(files.includes('arith-treepo.yaml') && files.includes('arith-treepo-async.yaml'));
  for (const f of files) loadConfig(join('examples', f));
  const sync = loadConfig('examples/arith-treepo.yaml');
  const async = loadConfig('examples/arith-treepo-async.yaml');
  assert.equal(async.run.mode, 'async');
  assert.equal(async.run.maxStaleness, 1);
  assert.deepEqual(async.optimize.loss.correction, { kind: 'decoupled', maxWeight: 5 });
  // the same task, model, warm-start, sampling, generator and trainer: the SFT cache is shared
  for (const k of ['task', 'model', 'sft', 'sampling', 'generate', 'trainer'] as const)
    assert.deepEqual(async[k], sync[k], k);
});
