/**
 * The docs' expensive commands, run for real through bin/arbor.mjs on small overrides: the main job
 * (2 steps instead of 100, a short warm-start, 1-digit sums so the tiny warm-start already answers some),
 * its resume, eval, export, sft, report, and the selection run. Each entry pairs the command exactly as
 * the docs print it (`doc`, checked against the docs by commands.test.ts) with what runs here (`local`:
 * the same command with smaller counts). Commands run in a temporary directory holding copies of the
 * configs, so `runs/...` paths are the sandbox's and the repository's runs/ is never touched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { splitCommand } from '../../testkit/docs/commands.js';

const repo = resolve('.');

const RUN = {
  steps: 2,
  promptsPerStep: 4,
  evalEvery: 0,
  evalCount: 16,
  evalPassK: 2,
  checkpointEvery: 1,
  logTreesEvery: 1,
};
/** Small overrides of the arithmetic runs: every section but these stays as the config has it. */
const ARITH = {
  run: RUN,
  task: { options: { digits: 1, ops: ['+'], teacherErrorRate: 0.7 } },
  sft: { steps: 60, examples: 512 },
};
/** Small overrides of the agent runs. */
const AGENT = { run: RUN, sft: { steps: 20, examples: 256 } };
/** The configs copied into the sandbox, each with its overrides (section by section, shallow). */
const CONFIGS: Record<string, Record<string, Record<string, unknown>>> = {
  'examples/arith-treepo.yaml': ARITH,
  'examples/arith-treepo-async.yaml': ARITH,
  'docs/examples/selection-run.yaml': ARITH,
  'examples/calculator-agent.yaml': AGENT,
  'examples/calculator-mcp.yaml': AGENT,
};

interface SmokeCommand {
  /** the command as docs print it, without `npx ` */
  doc: string;
  /** what runs in the sandbox */
  local: string;
  /** a check of the command's effect, beyond exit code 0 */
  check: (dir: string, stdout: string) => void;
}

const run = 'runs/arith-treepo';
const COMMANDS: SmokeCommand[] = [
  {
    doc: 'arbor train examples/arith-treepo.yaml',
    local: 'arbor train examples/arith-treepo.yaml --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, run, 'summary.json')), 'summary.json written'),
  },
  {
    doc: 'arbor train examples/arith-treepo-async.yaml',
    local: 'arbor train examples/arith-treepo-async.yaml --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/arith-treepo-async/summary.json')), 'summary.json written'),
  },
  {
    doc: 'arbor train examples/calculator-agent.yaml',
    local: 'arbor train examples/calculator-agent.yaml --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/calculator-agent/summary.json')), 'summary.json written'),
  },
  {
    doc: 'arbor train examples/calculator-mcp.yaml',
    local: 'arbor train examples/calculator-mcp.yaml --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/calculator-mcp/summary.json')), 'summary.json written'),
  },
  {
    doc: 'arbor train --resume runs/arith-treepo --steps 120',
    local: 'arbor train --resume runs/arith-treepo --steps 3 --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, run, 'checkpoints/step-3/state.json')), 'step 3 checkpointed'),
  },
  {
    doc: 'arbor eval --config examples/arith-treepo.yaml --checkpoint runs/arith-treepo/checkpoints/step-100/engine',
    local: 'arbor eval --config examples/arith-treepo.yaml --checkpoint runs/arith-treepo/checkpoints/step-3/engine',
    check: (_dir, out) => assert.match(out, /greedy/),
  },
  {
    doc:
      'arbor eval --task arith --options \'{"digits":2,"ops":["+","-"]}\' ' +
      '--checkpoint runs/arith-treepo/checkpoints/step-100/engine --count 200 --k 4',
    local:
      'arbor eval --task arith --options \'{"digits":2,"ops":["+","-"]}\' ' +
      '--checkpoint runs/arith-treepo/checkpoints/step-3/engine --count 16 --k 2',
    check: (_dir, out) => assert.match(out, /pass/),
  },
  {
    doc: 'arbor export runs/arith-treepo --to sft.jsonl',
    local: 'arbor export runs/arith-treepo --to sft.jsonl',
    check: (dir) => assert.ok(readFileSync(join(dir, 'sft.jsonl'), 'utf8').trim().length > 0, 'rows exported'),
  },
  {
    doc: 'arbor export runs/arith-treepo --to all.jsonl --min-reward=0.5',
    local: 'arbor export runs/arith-treepo --to all.jsonl --min-reward=0.5',
    check: (dir) => assert.ok(existsSync(join(dir, 'all.jsonl'))),
  },
  {
    doc: 'arbor sft --data sft.jsonl --out runs/sft-rejection --steps 300',
    local: 'arbor sft --data sft.jsonl --out runs/sft-rejection --steps 5',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/sft-rejection/model.safetensors'))),
  },
  {
    doc: 'arbor sft --data docs/examples/pairs.jsonl --out runs/sft-pairs --steps 300',
    local: 'arbor sft --data docs/examples/pairs.jsonl --out runs/sft-pairs --steps 5',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/sft-pairs/model.safetensors'))),
  },
  {
    doc: 'arbor report runs/arith-treepo',
    local: 'arbor report runs/arith-treepo',
    check: (dir) => assert.match(readFileSync(join(dir, run, 'report.html'), 'utf8'), /<html/i),
  },
  {
    doc: 'arbor train docs/examples/selection-run.yaml',
    local: 'arbor train docs/examples/selection-run.yaml --quiet',
    check: (dir) => assert.ok(existsSync(join(dir, 'runs/selection-run/trees/step-2.jsonl')), 'every step logged'),
  },
];

function sandbox(): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-docs-smoke-'));
  mkdirSync(join(dir, 'examples/mcp'), { recursive: true });
  mkdirSync(join(dir, 'docs/examples'), { recursive: true });
  for (const [file, overrides] of Object.entries(CONFIGS)) {
    const config = YAML.parse(readFileSync(join(repo, file), 'utf8')) as Record<string, Record<string, unknown>>;
    for (const [section, values] of Object.entries(overrides)) config[section] = { ...config[section], ...values };
    writeFileSync(join(dir, file), YAML.stringify(config));
  }
  for (const file of ['docs/examples/pairs.jsonl', 'examples/mcp/calc-server.mjs']) {
    copyFileSync(join(repo, file), join(dir, file));
  }
  // the example MCP server imports the SDK from node_modules, as it does in the repository
  symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

test("the docs' train/eval/export/sft/report commands run on small overrides", { timeout: 600_000 }, () => {
  const dir = sandbox();
  try {
    for (const c of COMMANDS) {
      const [program, ...args] = splitCommand(c.local);
      assert.equal(program, 'arbor');
      const started = Date.now();
      const r = spawnSync(process.execPath, [join(repo, 'bin/arbor.mjs'), ...args], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 300_000,
      });
      assert.equal(r.status, 0, `${c.local} exited ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}`);
      c.check(dir, r.stdout);
      console.log(`# ${c.local}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
