import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/core/errors.js';
import { rewardFromConfig } from '../../src/filter/registry.js';
import type { RewardFunction } from '../../src/filter/types.js';
import { parseConfig } from '../../src/run/config.js';

const item = { id: 'a', prompt: 'What is 6*7?', answer: '42' };
const taskReward: RewardFunction = {
  name: 'correct',
  score: async ({ response }) => ({
    reward: response.includes('42') ? 1 : 0,
    components: { correct: response.includes('42') ? 1 : 0 },
    info: {},
  }),
};

test('reward.parts from YAML: weighted sum with every component logged', async () => {
  const config = parseConfig({
    reward: {
      parts: [
        { kind: 'task' },
        { kind: 'format', weight: 0.5, pattern: '^The answer is' },
        { kind: 'length_penalty', maxLength: 10, cacheLength: 5 },
        { kind: 'math', weight: 2 },
      ],
    },
  });
  const reward = rewardFromConfig(config.reward, { taskReward });
  const r = await reward.score({ response: 'The answer is 42.', item, responseTokens: 8 });
  // correct 1, format 1 (×0.5), length −(8−5)/5 = −0.6, math 1 (×2)
  assert.deepEqual(r.components, { correct: 1, format: 1, length_penalty: -0.6, math: 1 });
  assert.ok(Math.abs(r.reward - (1 + 0.5 - 0.6 + 2)) < 1e-12, String(r.reward));
  const wrong = await reward.score({ response: 'The answer is 41.', item, responseTokens: 3 });
  assert.deepEqual(wrong.components, { correct: 0, format: 1, length_penalty: 0, math: 0 });
});

test('the default reward is the task verifier; noisy correction wraps the sum', async () => {
  const plain = rewardFromConfig(parseConfig({}).reward, { taskReward });
  assert.equal(plain, taskReward);
  const corrected = rewardFromConfig(
    parseConfig({ reward: { noisyCorrection: { falsePositiveRate: 0.1, falseNegativeRate: 0.2 } } }).reward,
    { taskReward },
  );
  const r = await corrected.score({ response: '42', item });
  assert.ok(Math.abs(r.reward - (1 - 0.1) / 0.7) < 1e-12);
});

test('bad reward config: errors name the key', () => {
  assert.throws(
    () => parseConfig({ reward: { parts: [{ kind: 'format' }] } }),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0\.pattern/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ reward: { parts: [{ kind: 'exact', tolerance: 1 }] } }),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0/.test(e.message) && /tolerance/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ reward: { parts: [{ kind: 'magic' }] } }),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0\.kind/.test(e.message),
  );
  assert.throws(
    () => rewardFromConfig(parseConfig({ reward: { parts: [{ kind: 'task' }] } }).reward),
    (e: unknown) => e instanceof ConfigError && /needs a task/.test(e.message),
  );
  assert.throws(
    () => rewardFromConfig(parseConfig({ reward: { parts: [{ kind: 'format', pattern: '(' }] } }).reward),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0\.pattern: invalid regular expression/.test(e.message),
  );
  assert.throws(
    () =>
      rewardFromConfig(
        parseConfig({ reward: { parts: [{ kind: 'length_penalty', maxLength: 5, cacheLength: 9 }] } }).reward,
      ),
    /cacheLength/,
  );
  assert.throws(
    () =>
      rewardFromConfig(
        parseConfig({
          reward: {
            parts: [{ kind: 'judge', baseUrl: 'http://127.0.0.1:1', model: 'm', apiKeyEnv: 'ARBOR_SURELY_UNSET_KEY' }],
          },
        }).reward,
      ),
    /ARBOR_SURELY_UNSET_KEY is not set/,
  );
});

test('reward.parts kinds code and program run in the sandbox', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-reg-'));
  const program = join(dir, 'reward.mjs');
  writeFileSync(program, 'export default ({ response, answer }) => (response.trim().endsWith(answer) ? 1 : 0);\n');
  const config = parseConfig({
    reward: {
      parts: [
        { kind: 'code', language: 'python', limits: { wallMs: 5000 } },
        { kind: 'program', path: program, weight: 0.5 },
      ],
    },
  });
  const reward = rewardFromConfig(config.reward);
  const codeItem = {
    id: 'sq',
    prompt: 'print the square of stdin',
    answer: 'x',
    meta: {
      tests: [
        { input: '3\n', expected: '9' },
        { input: '5\n', expected: '25' },
      ],
    },
  };
  const r = await reward.score({ response: '```python\nn = int(input())\nprint(n * n)\n```\nx', item: codeItem });
  assert.equal(r.components.code, 1);
  assert.equal(r.components.program, 1);
  assert.equal(r.reward, 1.5);
  rmSync(dir, { recursive: true, force: true });
});
