import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokensToTarget } from '../../bench/control.js';

test('control bench: tokens to target are interpolated between evaluations', () => {
  const curve: Array<[number, number]> = [
    [0, 0.5],
    [100, 0.7],
    [200, 0.9],
    [300, 0.85],
  ];
  const close = (a: number | undefined, b: number) =>
    assert.ok(a !== undefined && Math.abs(a - b) < 1e-9, `${a} vs ${b}`);
  close(tokensToTarget(curve, 0.8), 150);
  assert.equal(tokensToTarget(curve, 0.5), 0, 'reached at the start');
  close(tokensToTarget(curve, 0.6), 50);
  assert.equal(tokensToTarget(curve, 0.95), undefined, 'never reached');
});
