import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../../src/core/errors.js';
import {
  exactReward,
  numericReward,
  formatReward,
  lengthPenalty,
  lengthPenaltyReward,
  parseNumber,
} from '../../src/filter/basic.js';
import { composeRewards, scoreBatch, scoreSafely } from '../../src/filter/reward.js';
import { correctNoisyReward, noisyCorrectionReward } from '../../src/filter/noisy-correction.js';
import { judgeReward, parseVerdict } from '../../src/filter/judge.js';
import { Rng } from '../../src/core/rng.js';
import type { RewardFunction } from '../../src/filter/types.js';

const item = { id: '1', prompt: 'q', answer: '1,234' };

test('exact, numeric, format rewards', async () => {
  assert.equal((await exactReward().score({ response: ' 1,234 ', item })).reward, 1);
  assert.equal((await exactReward().score({ response: '1234', item })).reward, 0);
  assert.equal((await numericReward().score({ response: '1234.0000001', item })).reward, 1);
  assert.equal((await numericReward().score({ response: '1235', item })).reward, 0);
  assert.equal(parseNumber('7,425,000'), 7425000);
  assert.equal(parseNumber('abc'), null);
  assert.equal((await formatReward({ pattern: ';\\d+$' }).score({ response: 'x;12', item })).reward, 1);
  assert.equal((await formatReward({ pattern: ';\\d+$' }).score({ response: 'x12', item })).reward, 0);
});

test('DAPO overlong penalty: hand-computed values', async () => {
  assert.equal(lengthPenalty(100, 128, 16), 0);
  assert.equal(lengthPenalty(112, 128, 16), 0);
  assert.equal(lengthPenalty(120, 128, 16), -0.5);
  assert.equal(lengthPenalty(128, 128, 16), -1);
  assert.equal(lengthPenalty(500, 128, 16), -1);
  assert.equal(
    (await lengthPenaltyReward({ maxLength: 128, cacheLength: 16 }).score({ response: '', item, responseTokens: 124 }))
      .reward,
    -0.75,
  );
});

test('failures and timeouts become the failure reward with a reason; composition logs components', async () => {
  const throws: RewardFunction = {
    name: 'boom',
    score: async () => {
      throw new Error('kaput');
    },
  };
  const hangs: RewardFunction = { name: 'hang', score: () => new Promise(() => undefined) };
  const r1 = await scoreSafely(throws, { response: '', item }, { failureReward: -1 });
  assert.equal(r1.reward, -1);
  assert.match(String(r1.info.error), /kaput/);
  const r2 = await scoreSafely(hangs, { response: '', item }, { timeoutMs: 30 });
  assert.equal(r2.reward, 0);
  assert.match(String(r2.info.error), /timed out/);
  const both = composeRewards([
    { fn: exactReward(), weight: 2 },
    { fn: formatReward({ pattern: '1' }), weight: 0.5 },
  ]);
  const r3 = await both.score({ response: '1,234', item });
  assert.equal(r3.reward, 2.5);
  assert.deepEqual(r3.components, { exact: 1, format: 1 });
  const batch = await scoreBatch(
    exactReward(),
    ['1,234', 'x', '1,234'].map((response) => ({ response, item })),
    { concurrency: 2 },
  );
  assert.deepEqual(
    batch.map((b) => b.reward),
    [1, 0, 1],
  );
});

test('noisy-verifier backward correction is unbiased (simulation)', async () => {
  const fp = 0.2,
    fn = 0.1;
  const rng = new Rng(3);
  for (const truth of [0, 1]) {
    let sum = 0;
    const N = 200000;
    for (let i = 0; i < N; i++) {
      const observed = truth === 1 ? (rng.next() < fn ? 0 : 1) : rng.next() < fp ? 1 : 0;
      sum += correctNoisyReward(observed, fp, fn);
    }
    assert.ok(Math.abs(sum / N - truth) < 0.01, `E[r̂ | y=${truth}] = ${sum / N}`);
  }
  const wrapped = noisyCorrectionReward(exactReward(), { falsePositiveRate: fp, falseNegativeRate: fn });
  assert.ok(Math.abs((await wrapped.score({ response: '1,234', item })).reward - (1 - fp) / (1 - fp - fn)) < 1e-12);
  assert.throws(
    () => noisyCorrectionReward(exactReward(), { falsePositiveRate: 0.6, falseNegativeRate: 0.5 }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'reward.falsePositiveRate' && /sum < 1 \(got 0\.6, 0\.5\)/.test(e.message),
  );
});

test('judge: retries a 500, parses verdicts, reports unparseable replies (loopback server)', async () => {
  let calls = 0;
  const replies: Array<() => [number, string]> = [
    () => [500, 'oops'],
    () => [200, JSON.stringify({ choices: [{ message: { content: 'Reasoning...\nVERDICT: CORRECT' } }] })],
    () => [200, JSON.stringify({ choices: [{ message: { content: 'I think so' } }] })],
  ];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const [status, text] = replies[Math.min(calls++, 2)]();
      assert.match(JSON.parse(body).messages[0].content, /Reference answer:\n1,234/);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const judge = judgeReward({ baseUrl: url, model: 'judge', retryDelayMs: 5 });
    const ok = await judge.score({ response: '1234', item });
    assert.equal(ok.reward, 1);
    assert.equal(calls, 2, 'one retry after the 500');
    const bad = await judge.score({ response: '1234', item });
    assert.equal(bad.reward, 0);
    assert.match(String(bad.info.error), /unparseable/);
  } finally {
    server.close();
  }
  assert.equal(parseVerdict('SCORE: 7'), 0.7);
  assert.equal(parseVerdict('verdict: incorrect'), 0);
  assert.equal(parseVerdict('nothing'), null);
});
