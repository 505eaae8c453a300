/**
 * Issue 17, defect 11: the CLI parses with node's util.parseArgs in strict mode. An unknown flag, a
 * flag without its value, or a stray argument is an error naming it (before any work starts), and
 * `arbor <command> --help` prints that command's own options.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ArborError } from '../../src/core/errors.js';
import { parseCommand, helpText, type CommandSpec } from '../../src/cli/args.js';
import { TRAIN } from '../../src/cli/train.js';
import { EVAL } from '../../src/cli/eval.js';
import { SFT } from '../../src/cli/sft.js';
import { CONFIG } from '../../src/cli/config.js';
import { REPORT } from '../../src/cli/report.js';
import { UI } from '../../src/cli/ui.js';
import { EXPORT } from '../../src/cli/export.js';

const arbor = (args: string[]) =>
  spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 60_000 });

test('unknown flags, missing values and stray arguments are errors naming them', () => {
  const cases: Array<[string[], RegExp]> = [
    [['train', 'examples/arith-treepo.yaml', '--out', 'somewhere'], /arbor: train: Unknown option '--out'/],
    [['train', 'examples/arith-treepo.yaml', '--steps'], /arbor: train: Option '--steps <value>' argument missing/],
    [
      ['train', 'a.yaml', 'b.yaml'],
      /arbor: train: expected <config\.yaml> besides the options, got "a\.yaml" "b\.yaml"/,
    ],
    [['train', '--resume', 'runs/x', '--force'], /--force starts over and --resume continues/],
    [['train', 'examples/arith-treepo.yaml', '--steps', 'ten'], /--steps must be a number, got "ten"/],
    [['eval', '--checkpoint', 'x', '--cout', '5'], /arbor: eval: Unknown option '--cout'/],
    [['sft', '--data', 'x.jsonl', '--out', '--force'], /arbor: sft: .*'--out'/],
    [['config', '--chek', 'x.yaml'], /arbor: config: Unknown option '--chek'/],
    [['ui', 'runs', '--port', '70000'], /--port must be in \[0, 65535\], got 70000/],
    [['report'], /arbor: report: expected <run-dir> besides the options, got none/],
  ];
  for (const [args, re] of cases) {
    const r = arbor(args);
    assert.equal(r.status, 1, `${args.join(' ')}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    assert.match(r.stderr, re, args.join(' '));
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
});

test('every command answers --help with its own options', () => {
  const specs: CommandSpec[] = [TRAIN, EVAL, SFT, CONFIG, REPORT, UI, EXPORT];
  for (const spec of specs) {
    const r = arbor([spec.name, '--help']);
    assert.equal(r.status, 0, `${spec.name}: ${r.stderr}`);
    assert.equal(r.stdout, helpText(spec));
    assert.match(r.stdout, new RegExp(`^usage: arbor ${spec.name}`));
    for (const name of Object.keys(spec.flags))
      assert.ok(r.stdout.includes(`--${name}`), `${spec.name} --help lists --${name}`);
  }
  assert.match(arbor(['train', '-h']).stdout, /--resume RUN_DIR/);
});

test('parseCommand: values by type, positional bounds', () => {
  const f = parseCommand(['x.yaml', '--steps', '12', '--force'], TRAIN);
  assert.deepEqual(
    [f.positionals, f.number('steps', 0, { integer: true }), f.bool('force'), f.bool('quiet'), f.string('resume')],
    [['x.yaml'], 12, true, false, undefined],
  );
  assert.equal(f.number('missing-flag' as string, 7), 7);
  assert.throws(
    () => parseCommand(['--steps', '1.5'], TRAIN).number('steps', 0, { integer: true }),
    (e: unknown) => e instanceof ArborError && /--steps must be an integer, got "1\.5"/.test(e.message),
  );
  assert.throws(() => parseCommand([], REPORT), /expected <run-dir>/);
});
