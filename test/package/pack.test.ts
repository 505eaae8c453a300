/**
 * The installable package: scripts/pack-check.mjs end to end — `npm pack`, the
 * tarball's contents, `npm install <tarball>` into an empty project from npm's cache, `npx arbor train`
 * on that project's own TypeScript task module (async mode, shipped WASM kernels and UI), and `tsc`
 * against the shipped declarations — plus its content and type-error rules on hand-made inputs.
 * It does not skip: a machine that cannot pack or install fails here, naming the step.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const script = join(repo, 'scripts/pack-check.mjs');

interface PackCheck {
  StepError: new (step: string, message: string) => Error & { step: string };
  REQUIRED: string[];
  checkContents(paths: Set<string>, manifest: { scripts?: Record<string, string> }): void;
  checkTypeErrors(result: { code: number | string | null; output: string }): number;
}
const packCheck = (await import(pathToFileURL(script).href)) as PackCheck;

// what the tarball must hold, plus two ordinary files
const COMPLETE = [...packCheck.REQUIRED, 'src/run/loop.ts', 'README.md'];

function contentsError(paths: string[], scripts: Record<string, string> = { prepare: 'npm run build' }): string {
  try {
    packCheck.checkContents(new Set(paths), { scripts });
  } catch (error) {
    assert.ok(error instanceof packCheck.StepError, `not a StepError: ${String(error)}`);
    assert.equal(error.step, 'contents');
    return error.message;
  }
  return '';
}

test('pack-check contents: the complete list passes; a missing kernel, a test file, an install script fail', () => {
  assert.equal(contentsError(COMPLETE), '');
  const withoutKernel = COMPLETE.filter((p) => p !== 'build/kernels.wasm');
  assert.equal(contentsError(withoutKernel), 'contents: missing build/kernels.wasm');
  assert.equal(
    contentsError([...COMPLETE, 'testkit/package/consumer/my-task.ts']),
    'contents: ships testkit/package/consumer/my-task.ts (nothing under testkit/ belongs in the package)',
  );
  assert.equal(
    contentsError([...COMPLETE, 'build/ui/app.js.812.partial']),
    "contents: ships build/ui/app.js.812.partial, a build's unfinished output",
  );
  assert.equal(
    contentsError(COMPLETE, { postinstall: 'npm run build' }),
    "contents: package.json scripts.postinstall would run in consumers' installs",
  );
  const withoutTypes = withoutKernel.filter((p) => p !== 'dist/types/index.d.ts');
  assert.match(contentsError(withoutTypes), /kernels\.wasm; missing dist/);
});

test('pack-check types: only wrong-types.ts may fail, and it must fail with TS2322', () => {
  const expected = "wrong-types.ts(9,54): error TS2322: Type 'number' is not assignable to type 'string'.";
  assert.equal(packCheck.checkTypeErrors({ code: 2, output: `${expected}\n` }), 1);
  const rejects = (output: string, code: number, why: RegExp) =>
    assert.throws(
      () => packCheck.checkTypeErrors({ code, output }),
      (e: unknown) => e instanceof packCheck.StepError && e.step === 'typecheck' && why.test(e.message),
    );
  rejects('', 0, /no TS2322 in wrong-types\.ts \(exit 0\)/);
  rejects(`${expected}\ncheck-types.ts(3,1): error TS2305: Module '"arbor"' has no exported member 'x'.`, 2, /outside/);
  rejects("wrong-types.ts(9,1): error TS2307: Cannot find module 'arbor'", 2, /no TS2322/);
});

test(
  'npm pack → npm install into an empty project → npx arbor train on its own TS task → tsc on its files',
  {
    timeout: 480_000,
  },
  (t) => {
    const out = mkdtempSync(join(tmpdir(), 'arbor-pack-test-'));
    try {
      const reportFile = join(out, 'report.json');
      const result = spawnSync(process.execPath, [script, '--json', reportFile], { cwd: repo, encoding: 'utf8' });
      assert.equal(result.status, 0, `pack-check failed:\n${result.stderr}\n${result.stdout.slice(-4000)}`);
      const report = JSON.parse(readFileSync(reportFile, 'utf8'));
      t.diagnostic(`pack-check ms: ${JSON.stringify(report.ms)}; tarball ${JSON.stringify(report.tarball)}`);
      assert.equal(report.ok, true);
      assert.equal(report.train.steps, 2);
      assert.equal(report.train.mode, 'async');
      assert.ok(report.typeErrors >= 1, `expected wrong-types.ts to fail, report ${JSON.stringify(report)}`);
      assert.equal(existsSync(report.work), false, `pack-check left ${report.work} behind`);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  },
);
