/**
 * `arbor export`: verified trajectories of a run as SFT rows, deduplicated, filterable by reward,
 * hinted/error/unfinished leaves left out; `arbor sft --data` trains on the file (the rejection-
 * sampling round trip). Rows of a real run are re-checked by the task's own verifier.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNode, createTree, treeToJSON, type RolloutTree } from '../../src/core/tree.js';
import { exportRun } from '../../src/replay/export.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { getTask } from '../../src/tasks/index.js';
import { tinyRun } from '../../testkit/reliability/tiny-run.js';

const text = (s: string) => Array.from(s, (c) => c.charCodeAt(0));
const decode = (t: number[]) => String.fromCharCode(...t);

function tree(
  id: string,
  prompt: string,
  leaves: Array<[string, number, ('stop' | 'error' | null)?]>,
  meta?: Record<string, unknown>,
): RolloutTree {
  const t = createTree(id, prompt, text(prompt), meta);
  for (const [completion, reward, finish] of leaves) {
    const n = addNode(t, '0', { tokens: text(completion), finishReason: finish === undefined ? 'stop' : finish });
    n.reward = reward;
  }
  return t;
}

test('exportRun by hand: correct leaves only, duplicates and hinted/error/unfinished leaves left out, earliest step kept', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-export-'));
  mkdirSync(join(dir, 'trees'));
  const step1 = [
    tree('a', '1+1=', [
      ['2', 1],
      ['3', 0],
      ['2', 1],
    ]),
    tree('h', '2+2=', [['4', 1]], { hint: { kind: 'response', text: '4', tokens: 1 } }),
  ];
  const step5 = [
    tree('b', '1+1=', [
      ['2', 1],
      ['11', 0.4],
    ]),
    tree('c', '5+5=', [
      ['10', 1, null],
      ['10', 1, 'error'],
    ]),
  ];
  writeFileSync(join(dir, 'trees', 'step-1.jsonl'), step1.map(treeToJSON).join('\n') + '\n');
  writeFileSync(join(dir, 'trees', 'step-5.jsonl'), step5.map(treeToJSON).join('\n') + '\n');
  writeFileSync(join(dir, 'trees', 'notes.txt'), 'not a tree file');
  const files: Array<[number, number]> = [];
  const r = exportRun(dir, { decode, onFile: (done, total) => files.push([done, total]) });
  assert.deepEqual(r.rows, [{ prompt: '1+1=', completion: '2', reward: 1, step: 1, item: '1+1=' }]);
  assert.deepEqual(files, [
    [1, 2],
    [2, 2],
  ]);
  assert.deepEqual(r.counts, { leaves: 8, kept: 1, duplicates: 2, filtered: 2, excluded: 3, files: 2 });
  const loose = exportRun(dir, { decode, minReward: 0.3 });
  assert.deepEqual(
    loose.rows.map((x) => [x.completion, x.step]),
    [
      ['2', 1],
      ['11', 5],
    ],
    'reward ≥ 0.3 keeps the 0.4 leaf',
  );
  assert.throws(() => exportRun(join(dir, 'trees'), { decode }), /no trees\/ directory/);
});

test(
  'arbor export of a real run: every row passes the task verifier; arbor sft trains on the file',
  { timeout: 300_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-export-run-'));
    await train(parseConfig(tinyRun(root, 'run', { steps: 4, logTreesEvery: 1 })), { quiet: true });
    const out = join(root, 'sft.jsonl');
    // stderr a pipe: the progress lines are plain lines (every tenth of the tree files; here each of the 4)
    const env = { ...process.env, CI: '' };
    const arbor = (args: string[]) =>
      spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 120_000, env });
    const r = arbor(['export', join(root, 'run'), '--to', out]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /sft\.jsonl: \d+ rows from \d+ leaves in 4 tree files/);
    assert.match(
      r.stderr,
      /^export: 1\/4 tree files eta \d+s\nexport: 2\/4 .*\nexport: 3\/4 .*\nexport: 4\/4 tree files eta 0s\n$/,
    );
    const rows = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { prompt: string; completion: string; reward: number; step: number });
    assert.ok(rows.length >= 2, `the tiny model solves some 1-digit additions (${rows.length} rows)`);
    const task = getTask('arith', { digits: 1, ops: ['+'] });
    for (const row of rows) {
      const [, a, b] = /^(\d+)\+(\d+)=$/.exec(row.prompt) ?? [];
      assert.ok(a !== undefined, `prompt ${row.prompt}`);
      const scored = await task.reward.score({
        response: row.completion,
        item: { id: row.prompt, prompt: row.prompt, answer: String(Number(a) + Number(b)) },
      });
      assert.equal(scored.reward, 1, `${row.prompt}${row.completion} verifies`);
    }
    assert.equal(new Set(rows.map((x) => x.prompt + '\u0000' + x.completion)).size, rows.length, 'no duplicates');
    assert.match(arbor(['export', join(root, 'run'), '--to', out]).stderr, /exists; pass --force/);
    const all = join(root, 'all.jsonl');
    const quiet = arbor(['export', join(root, 'run'), '--to', all, '--min-reward=-1', '--quiet']);
    assert.equal(quiet.status, 0);
    assert.equal(quiet.stderr, '');
    assert.ok(
      readFileSync(all, 'utf8').trim().split('\n').length > rows.length,
      'without the correctness filter more rows come out',
    );
    const sft = arbor(['sft', '--data', out, '--out', join(root, 'ckpt'), '--steps', '5', '--context', '64']);
    assert.equal(sft.status, 0, sft.stderr);
    assert.ok(existsSync(join(root, 'ckpt', 'model.safetensors')));
  },
);
