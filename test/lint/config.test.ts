/**
 * The linter and formatter configs do what CI relies on: typed ESLint reports promises nobody handles
 * (no-floating-promises, no-misused-promises) in TypeScript and in .mjs scripts, lets node:test's test()
 * float, and skips AssemblyScript and fixtures; Prettier formats at 120 columns with single quotes and
 * skips fixtures, build outputs and generated files. It lints probe text, not the tree (`npm run lint`).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { ESLint } from 'eslint';
import * as prettier from 'prettier';

const root = fileURLToPath(new URL('../../', import.meta.url));
const eslint = new ESLint({ cwd: root });

const probe = [
  "import { setTimeout as sleep } from 'node:timers/promises';",
  "import { test } from 'node:test';",
  "test('runner-owned promise', async () => {});",
  'sleep(1);',
  '[1].forEach(async () => { await sleep(1); });',
  'void sleep(1);',
  'sleep(1).catch(() => {});',
  '',
].join('\n');

/** [rule, line] of each problem ESLint reports for `text` linted as if it were `file`. */
async function problems(text: string, file: string): Promise<Array<[string | null, number]>> {
  const [result] = await eslint.lintText(text, { filePath: file });
  return result.messages.map((m) => [m.ruleId, m.line]);
}

test('eslint: an unhandled and a misused promise are errors in TypeScript; test(), void and .catch pass', async () => {
  // the path must be a file in tsconfig.json's program: this test itself
  const found = await problems(probe, 'test/lint/config.test.ts');
  assert.deepEqual(found, [
    ['@typescript-eslint/no-floating-promises', 4],
    ['@typescript-eslint/no-misused-promises', 5],
  ]);
});

test('eslint: the same in an .mjs script (typed through the default project)', async () => {
  const found = await problems(probe, 'scripts/lint-probe.mjs');
  assert.deepEqual(found, [
    ['@typescript-eslint/no-floating-promises', 4],
    ['@typescript-eslint/no-misused-promises', 5],
  ]);
});

test('eslint: AssemblyScript sources, fixtures and build outputs are not linted', async () => {
  const ignored = async (file: string) => eslint.isPathIgnored(file);
  assert.equal(await ignored('src/engine/kernels/assembly/matmul.ts'), true);
  assert.equal(await ignored('testkit/ui/fixtures/rundirs/a.js'), true);
  assert.equal(await ignored('build/ui/app.js'), true);
  assert.equal(await ignored('src/run/loop.ts'), false);
});

test('prettier: 120 columns, single quotes, trailing commas; fixtures, lockfile and builds ignored', async () => {
  const file = `${root}src/run/loop.ts`;
  const options = await prettier.resolveConfig(file);
  assert.deepEqual(options, { printWidth: 120, singleQuote: true, trailingComma: 'all' });
  const call = `const x = f(${Array.from({ length: 12 }, (_, i) => `"argument${i}"`).join(', ')});\n`;
  const formatted = await prettier.format(call, { ...options, filepath: file });
  assert.ok(call.length > 120, 'the probe line must be over the limit');
  assert.ok(
    formatted.split('\n').every((line) => line.length <= 120),
    formatted,
  );
  assert.match(formatted, /^ {2}'argument0',$/m);
  assert.match(formatted, /^ {2}'argument11',$/m);
  const ignorePath = [`${root}.gitignore`, `${root}.prettierignore`];
  const ignored = async (path: string) => (await prettier.getFileInfo(`${root}${path}`, { ignorePath })).ignored;
  for (const path of [
    'package-lock.json',
    'testkit/ui/fixtures/iid.yaml',
    'testkit/hf/transformers-fixtures/manifest.json',
    'build/ui/app.js',
    'runs/x/summary.json',
    'docs/config-reference.md',
    'src/engine/kernels/assembly/matmul.ts',
  ]) {
    assert.equal(await ignored(path), true, path);
  }
  assert.equal(await ignored('src/run/loop.ts'), false);
  assert.equal(await ignored('README.md'), false);
});
