import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { programReward } from '../../src/filter/program.js';
import { scoreSafely } from '../../src/filter/reward.js';
import { ConfigError } from '../../src/core/errors.js';
import type { TaskItem } from '../../src/core/types.js';
import { loopbackListener } from './loopback.js';

const item: TaskItem = { id: 'p1', prompt: 'Say hello to Ada', answer: 'hello Ada', meta: { bonus: 0.5 } };
const limits = { wallMs: 3000, cpuSeconds: 1, memoryMB: 128 };

test('a program reward computes a score (number, components, async, CommonJS, from a path)', async () => {
  const fn = programReward({
    source: `export default function reward({ response, answer, prompt, meta }) {
  const exact = response.trim() === answer ? 1 : 0;
  console.log('debug output is fine');
  return { reward: exact + meta.bonus, components: { exact, promptLength: prompt.length } };
}`,
    limits,
    name: 'greet',
  });
  const r = await fn.score({ response: ' hello Ada ', item });
  assert.equal(r.reward, 1.5);
  assert.deepEqual(r.components, { greet: 1.5, 'greet.exact': 1, 'greet.promptLength': 16 });
  assert.equal((await fn.score({ response: 'bye', item })).reward, 0.5);

  const asyncFn = programReward({
    source:
      'export default async ({ response }) => { await new Promise((r) => setTimeout(r, 10)); return response.length; }',
    limits,
  });
  assert.equal((await asyncFn.score({ response: 'abcd', item })).reward, 4);

  const cjs = programReward({
    source: 'module.exports = ({ answer, response }) => (answer === response ? 1 : -1);',
    limits,
  });
  assert.equal((await cjs.score({ response: 'no', item })).reward, -1);

  const dir = await mkdtemp(join(tmpdir(), 'arbor-prog-test-'));
  try {
    await writeFile(join(dir, 'r.mjs'), 'export default () => 0.25;\n');
    assert.equal(
      (await programReward({ path: join(dir, 'r.mjs'), limits }).score({ response: '', item })).reward,
      0.25,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  assert.throws(
    () => programReward({}),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'source' && /exactly one of "source" and "path"/.test(e.message),
  );
  assert.throws(
    () => programReward({ path: '/nonexistent/reward.mjs' }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'path' &&
      /cannot read \/nonexistent\/reward\.mjs \(ENOENT\)/.test(e.message),
  );
});

test('a malicious program reward cannot escape and yields a failure', async () => {
  const outside = await mkdtemp(join(tmpdir(), 'arbor-prog-out-'));
  const target = join(outside, 'pwned.txt');
  const listener = await loopbackListener();
  const port = listener.port;
  try {
    const writer = programReward({
      source: `import { writeFileSync } from 'node:fs';\nexport default () => { writeFileSync(${JSON.stringify(target)}, 'x'); return 1; };`,
      limits,
    });
    await assert.rejects(writer.score({ response: '', item }), /threw: \[ERR_ACCESS_DENIED\]/);
    assert.equal(existsSync(target), false);

    const socket = programReward({
      source:
        `import net from 'node:net';\nexport default () => new Promise((resolve, reject) => { ` +
        `const s = net.connect(${port}, '127.0.0.1', () => resolve(1)); s.on('error', reject); });`,
      limits,
    });
    await assert.rejects(
      socket.score({ response: '', item }),
      /threw: \[ERR_SANDBOX_DENIED\] Error: sandbox: network connection is not allowed/,
    );
    await new Promise((res) => setTimeout(res, 50));
    listener.assertNoConnections('sandboxed program');

    const spawner = programReward({
      source: `import { execSync } from 'node:child_process';\nexport default () => Number(execSync('echo 1').toString());`,
      limits,
    });
    await assert.rejects(spawner.score({ response: '', item }), /threw: \[ERR_ACCESS_DENIED\]/);

    const looper = programReward({ source: 'export default () => { for (;;) {} };', limits });
    const t = performance.now();
    await assert.rejects(looper.score({ response: '', item }), /timed out/);
    assert.ok(performance.now() - t < 6000, 'stopped by its limits (wall 3 s)');

    // Through scoreSafely each failure becomes the failure reward with the reason in info.error.
    const safe = await scoreSafely(writer, { response: '', item }, { failureReward: -1 });
    assert.equal(safe.reward, -1);
    assert.match(String(safe.info.error), /program reward "program"/);
  } finally {
    listener.close();
    await rm(outside, { recursive: true, force: true });
  }
});

test('bad return values are errors', async () => {
  const cases: Array<[string, RegExp]> = [
    ['export default () => "1"', /expected a number/],
    ['export default () => 42', /outside \[-10, 10\]/],
    ['export default () => NaN', /not a finite number/],
    ['export default () => ({ reward: 1, components: { a: "x" } })', /component "a"/],
    ['export default () => ({ reward: Infinity })', /reward is Infinity/],
    ['export default () => undefined', /returned null/],
    ['export const notDefault = 1;', /no default export/],
    ['export default () => { throw new Error("nope") }', /threw: Error: nope/],
    ['export default () => { process.exit(3) }', /no result \(exit 3\)/],
  ];
  await Promise.all(
    cases.map(async ([source, message]) => {
      await assert.rejects(programReward({ source, limits }).score({ response: '', item }), message, source);
    }),
  );
  assert.equal(
    (await programReward({ source: 'export default () => 42', range: [0, 100], limits }).score({ response: '', item }))
      .reward,
    42,
  );
});
