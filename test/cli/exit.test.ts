/**
 * No exit path leaves `arbor train` hanging or a server running: `bin/arbor.mjs`
 * as a child, with MCP reference servers marked by an environment variable so that every server
 * process it starts is seen (/proc) while it runs and checked gone after it exits:
 * - a config error at load once server-everything is up (the held-out prompt over-long,
 *   task.overlong: error): exit 1 within seconds with the error message;
 * - the same with server-memory, failing in the producer (training prompts over-long) after both the
 *   evaluation's and the producer's servers are up;
 * - SIGINT in the middle of a run: exit 130, environments closed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { everythingEnv, markedPids, MEMORY_SERVER, runArbor } from '../../testkit/env/mcp-servers.js';

/** A run config file in `dir` (YAML), a tiny embedded model with no warm start. */
function writeConfig(dir: string, name: string, sections: Record<string, unknown>): string {
  const config = {
    run: {
      name,
      outDir: join(dir, name),
      steps: 2,
      promptsPerStep: 2,
      evalEvery: 0,
      evalCount: 4,
      evalPassK: 0,
      trainItems: 8,
    },
    model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 24 },
    sft: { enabled: false },
    sampling: { maxResponseTokens: 8 },
    generate: { kind: 'agent', format: 'arbor', groupSize: 2, maxTurns: 2 },
    ...sections,
  };
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, YAML.stringify(config));
  return file;
}

/** Every process the run started is gone (the pids seen while it ran, and any still carrying the mark). */
function assertNoServerLeft(pids: number[], mark: string): void {
  assert.deepEqual(markedPids(mark), [], `servers left running: ${markedPids(mark).join(', ')}`);
  for (const pid of pids) assert.throws(() => process.kill(pid, 0), /ESRCH/, `server ${pid} is gone`);
}

test(
  'a config error after server-everything started: exit 1 within seconds, message shown, no server left',
  { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-exit-'));
    const mark = `everything-${process.pid}-${Date.now()}`;
    try {
      // "tools: get-sum(a,b)\n" fits a 24-token context, a calculator prompt with it does not
      const file = writeConfig(dir, 'everything', {
        task: { name: 'calculator', overlong: 'error' },
        env: everythingEnv(['get-sum'], { ARBOR_TEST_MARK: mark }),
      });
      const exit = await runArbor(['train', file], mark, 60_000);
      assert.equal(exit.signal, null, `not killed at the limit (stderr: ${exit.stderr})`);
      assert.equal(exit.code, 1, exit.stderr);
      assert.match(
        exit.stderr,
        /arbor: item \S+: the held-out prompt is \d+ tokens, which leaves no room for a response in the model's context of 24; the tools line takes 20 of them/,
      );
      assert.ok(exit.serverPids.length >= 1, 'server-everything was started before the error');
      assert.ok(exit.ms < 20_000, `exited in ${exit.ms} ms`);
      assertNoServerLeft(exit.serverPids, mark);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'server-memory: the producer fails at load (training prompts over-long) after two servers started: exit 1, none left',
  { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-exit-'));
    const mark = `memory-${process.pid}-${Date.now()}`;
    try {
      const rows = (prompt: string) =>
        Array.from({ length: 8 }, (_, i) => JSON.stringify({ q: `${prompt}${i}=`, a: String(i) })).join('\n') + '\n';
      writeFileSync(join(dir, 'train.jsonl'), rows('9'.repeat(40)));
      writeFileSync(join(dir, 'test.jsonl'), rows('1+'));
      const env = {
        kind: 'mcp',
        command: process.execPath,
        args: [MEMORY_SERVER],
        tools: ['read_graph'],
        env: { ARBOR_TEST_MARK: mark, MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
      };
      const task = {
        name: 'dataset',
        options: {
          train: join(dir, 'train.jsonl'),
          test: join(dir, 'test.jsonl'),
          fields: { prompt: 'q', answer: 'a' },
        },
      };
      const file = writeConfig(dir, 'memory', {
        task,
        env,
        model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 40 },
      });
      const exit = await runArbor(['train', file], mark, 60_000);
      assert.equal(exit.signal, null, `not killed at the limit (stderr: ${exit.stderr})`);
      assert.equal(exit.code, 1, exit.stderr);
      assert.match(exit.stderr, /train\.jsonl:1 \(id train:1\): the training prompt is \d+ tokens/);
      assert.ok(
        exit.serverPids.length >= 2,
        `the evaluation's and the producer's servers were started (${exit.serverPids.join(', ')})`,
      );
      assert.ok(exit.ms < 20_000, `exited in ${exit.ms} ms`);
      assertNoServerLeft(exit.serverPids, mark);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('SIGINT during a run: exit 130, the environments closed, no server left', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-exit-'));
  const mark = `sigint-${process.pid}-${Date.now()}`;
  try {
    const file = writeConfig(dir, 'sigint', {
      run: {
        name: 'sigint',
        outDir: join(dir, 'sigint'),
        steps: 100_000,
        promptsPerStep: 2,
        evalEvery: 0,
        evalCount: 2,
        evalPassK: 0,
        trainItems: 8,
      },
      task: { name: 'calculator', options: { minDigitsA: 1, maxDigitsA: 1, minDigitsB: 1, maxDigitsB: 1 } },
      model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 48 },
      env: everythingEnv(['get-sum'], { ARBOR_TEST_MARK: mark }),
    });
    let interruptedAt = 0;
    const exit = await runArbor(['train', file], mark, 60_000, (stderr) => {
      if (!/step 1\/100000/.test(stderr)) return undefined;
      interruptedAt = Date.now();
      return 'SIGINT';
    });
    assert.ok(interruptedAt > 0, `the run reached step 1 (stderr: ${exit.stderr})`);
    assert.equal(exit.signal, null, `not killed at the limit (stderr: ${exit.stderr})`);
    assert.equal(exit.code, 130, exit.stderr);
    assert.match(exit.stderr, /arbor: SIGINT: the run stopped; its environments and engine are closed/);
    assert.ok(exit.serverPids.length >= 2, `servers seen: ${exit.serverPids.join(', ')}`);
    assertNoServerLeft(exit.serverPids, mark);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
