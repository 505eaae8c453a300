/**
 * The Tinker loss on the wire (src/wire/tinker-loss.ts), which the Tinker client sends and arbor serve
 * reads: every loss Tinker has survives the round trip, the ones it lacks are refused when sending, and
 * a bad received config names its field.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lossFromTinker, lossToTinker } from '../../src/wire/tinker-loss.js';
import type { LossSpec } from '../../src/engine/types.js';

const invalid = (message: string) => new Error(message);

test('Tinker losses round-trip: cross_entropy, importance_sampling, ppo (clip bounds as ratio thresholds)', () => {
  const losses: LossSpec[] = [
    { kind: 'cross_entropy' },
    { kind: 'importance_sampling' },
    { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 },
  ];
  for (const loss of losses) {
    const wire = lossToTinker(loss);
    const back = lossFromTinker(wire.loss_fn, wire.loss_fn_config, invalid);
    assert.equal(back.kind, loss.kind);
    if (loss.kind === 'ppo' && back.kind === 'ppo') {
      assert.ok(Math.abs(back.clipLow - loss.clipLow) < 1e-12 && Math.abs(back.clipHigh - loss.clipHigh) < 1e-12);
    }
  }
  assert.deepEqual(lossToTinker({ kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }).loss_fn_config, {
    clip_low_threshold: 0.8,
    clip_high_threshold: 1.28,
  });
  // Tinker's defaults when the config is absent
  assert.deepEqual(lossFromTinker('ppo', undefined, invalid), {
    kind: 'ppo',
    clipLow: 0.19999999999999996,
    clipHigh: 0.19999999999999996,
  });
});

test('losses Tinker lacks are refused when sending; bad received ones name the field', () => {
  assert.throws(() => lossToTinker({ kind: 'gspo', clipLow: 0.2, clipHigh: 0.2 }), /gspo is not a Tinker built-in/);
  assert.throws(
    () => lossToTinker({ kind: 'ppo', clipLow: 0.2, clipHigh: 0.2, dualClip: 3 }),
    /dual clip \/ truncation/,
  );
  assert.throws(() => lossFromTinker('dpo', {}, invalid), /field "loss_fn": unsupported "dpo"/);
  assert.throws(
    () => lossFromTinker('ppo', { clip_low_threshold: 1.5 }, invalid),
    /field "loss_fn_config\.clip_low_threshold"/,
  );
  assert.throws(
    () => lossFromTinker('ppo', { clip_high_threshold: 'x' }, invalid),
    /field "loss_fn_config\.clip_high_threshold"/,
  );
});
