/**
 * Issue 17, defect 10 (the `arbor sft` part): flags are validated with the flag named, an `--out`
 * that cannot take a checkpoint fails before any training, and an over-long row is reported by
 * file:line, not by its index after shuffling.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'arbor-sft-cli-'));
const data = join(dir, 'pairs.jsonl');
writeFileSync(
  data,
  Array.from({ length: 20 }, (_, i) => JSON.stringify({ prompt: `${i}+1=`, completion: String(i + 1) })).join('\n') +
    '\n',
);
const sft = (args: string[]) =>
  spawnSync(process.execPath, ['bin/arbor.mjs', 'sft', ...args], { encoding: 'utf8', timeout: 120_000 });

test('sft flags: non-numbers, non-integers and out-of-range values are errors naming the flag, before training', () => {
  const out = join(dir, 'ckpt');
  const cases: Array<[string[], RegExp]> = [
    [['--steps', 'abc'], /--steps must be a number, got "abc"/],
    [['--lr', 'abc'], /--lr must be a number, got "abc"/],
    [['--steps', '2.5'], /--steps must be an integer, got "2.5"/],
    [['--lr=-1'], /--lr must be in \[1e-12, 10\], got -1/],
    [['--lr', '-1'], /Option '--lr' argument is ambiguous/],
    [['--batch', '0'], /--batch must be in \[1, 4096\]/],
    [['--steps'], /Option '--steps <value>' argument missing/],
  ];
  for (const [extra, re] of cases) {
    const r = sft(['--data', data, '--out', out, ...extra]);
    assert.equal(r.status, 1, `${extra.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.doesNotMatch(r.stderr, /sft \[|loss/, 'no training started');
  }
});

test('sft --out onto an existing file or a foreign non-empty directory fails before training', () => {
  const file = join(dir, 'taken.txt');
  writeFileSync(file, 'keep me');
  const r = sft(['--data', data, '--out', file, '--steps', '5']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /--out .*taken\.txt is an existing file/);
  const foreign = join(dir, 'foreign');
  mkdirSync(foreign);
  writeFileSync(join(foreign, 'notes.md'), 'x');
  const f = sft(['--data', data, '--out', foreign, '--steps', '5']);
  assert.equal(f.status, 1);
  assert.match(f.stderr, /non-empty directory that holds no checkpoint/);
});

test('an over-long SFT row is named by file:line', () => {
  const long = join(dir, 'long.jsonl');
  writeFileSync(
    long,
    [
      JSON.stringify({ prompt: '1+1=', completion: '2' }),
      JSON.stringify({ prompt: '1'.repeat(300), completion: '2' }),
      JSON.stringify({ prompt: '2+2=', completion: '4' }),
    ].join('\n') + '\n',
  );
  const r = sft(['--data', long, '--out', join(dir, 'long-out'), '--steps', '5', '--context', '64']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(
      `${long.replace(/[.]/g, '\\.')}:2: prompt \\+ completion are 30\\d tokens, over the model's contextLength 64`,
    ),
  );
});
