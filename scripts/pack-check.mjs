#!/usr/bin/env node
// The installable-package check: `npm pack` (prepare builds the WASM kernels and UI, prepack the
// .d.ts), the tarball's file list, `npm install <tarball>` into an empty temp project (no build tools,
// offline from npm's cache), `npx arbor train config.yaml` on that project's own TypeScript task, and
// `tsc` on a file importing 'arbor' (plus one that must fail). Prints one JSON report line; exits 1
// naming the step that failed. Removes its temp dir and kills every process group it started.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const USAGE = `usage: node scripts/pack-check.mjs [--repo DIR] [--json FILE] [--keep]
  --repo DIR   the package to pack (default: this repository)
  --json FILE  also write the report to FILE
  --keep       keep the temp dir (printed) for inspection`;

/** What the tarball must hold (the runtime reads build/ and the worker entry; consumers read dist/types). */
export const REQUIRED = [
  'package.json',
  'bin/arbor.mjs',
  'src/index.ts',
  'src/cli/main.ts',
  'src/run/rollout-worker.mjs',
  'build/kernels.wasm',
  'build/kernels-fma.wasm',
  'build/ui/app.js',
  'build/ui/report.js',
  'build/ui/app.css',
  'dist/types/index.d.ts',
];
/** What it must not: build inputs, tests, benchmarks, local state. */
const FORBIDDEN = [
  'src/engine/kernels/assembly/',
  'test/',
  'testkit/',
  'bench/',
  'scripts/',
  'runs/',
  'node_modules/',
  'shared/',
  'tsconfig.build.json',
];
/** Lifecycle scripts that would run in a consumer's `npm install`. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'];
/** Per-step limits (ms): generous on 2 shared cores, so a hang fails the check instead of CI's timeout. */
const LIMIT_MS = { pack: 120_000, install: 180_000, train: 180_000, typecheck: 120_000 };

function parseArgs(argv) {
  const options = { repo: join(dirname(fileURLToPath(import.meta.url)), '..'), json: undefined, keep: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '--keep') options.keep = true;
    else if ((flag === '--repo' || flag === '--json') && argv[i + 1]) options[flag.slice(2)] = resolve(argv[++i]);
    else {
      console.error(`pack-check: unknown argument "${flag}"\n${USAGE}`);
      process.exit(2);
    }
  }
  return options;
}

/** The environment for children: npm's per-script variables of an enclosing `npm test` removed. */
function childEnvironment() {
  const keep = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('npm_') && !keep.has(key)) continue;
    if (key === 'INIT_CWD' || key === 'NODE_TEST_CONTEXT' || key === 'NODE_OPTIONS') continue;
    env[key] = value;
  }
  return env;
}

export class StepError extends Error {
  constructor(step, message) {
    super(`${step}: ${message}`);
    this.step = step;
  }
}

const live = new Set();
/** The temp dir of the check in progress (removed on SIGINT/SIGTERM too, unless --keep). */
let workDir;

/** Kills a child's whole process group (npx → sh → node → MCP servers...); quiet when it is gone. */
function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group already exited
  }
}

/** Runs a command in its own process group; resolves { code, output, ms }, rejects on timeout. */
function run(step, command, args, cwd, limitMs) {
  const started = Date.now();
  return new Promise((resolvePromise, reject) => {
    const stdio = ['ignore', 'pipe', 'pipe'];
    const child = spawn(command, args, { cwd, env: childEnvironment(), detached: true, stdio });
    live.add(child.pid);
    let output = '';
    const collect = (chunk) => {
      output += chunk;
      if (output.length > 4_000_000) output = output.slice(-2_000_000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => {
      killGroup(child.pid);
      reject(new StepError(step, `\`${command} ${args.join(' ')}\` ran past ${limitMs} ms\n${tail(output)}`));
    }, limitMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new StepError(step, `cannot start ${command}: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      killGroup(child.pid); // anything it left behind in its group
      live.delete(child.pid);
      resolvePromise({ code: code ?? signal, output, ms: Date.now() - started });
    });
  });
}

function tail(text, lines = 40) {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

async function mustRun(step, command, args, cwd, limitMs) {
  const result = await run(step, command, args, cwd, limitMs);
  if (result.code !== 0) {
    const line = `${command} ${args.join(' ')}`;
    throw new StepError(step, `\`${line}\` exited ${result.code} in ${cwd}\n${tail(result.output)}`);
  }
  return result;
}

/** `npm pack --json` prints lifecycle output before its JSON array; the array is the last `[` line on. */
function parsePackJson(output) {
  const start = output.lastIndexOf('\n[\n') >= 0 ? output.lastIndexOf('\n[\n') + 1 : output.indexOf('[');
  try {
    const [entry] = JSON.parse(output.slice(start));
    return entry;
  } catch (error) {
    throw new StepError('pack', `cannot read npm pack --json output (${error.message})\n${tail(output)}`);
  }
}

/** Throws a StepError listing every required file missing, forbidden file shipped and install script. */
export function checkContents(paths, manifest) {
  const problems = [];
  for (const file of REQUIRED) if (!paths.has(file)) problems.push(`missing ${file}`);
  for (const prefix of FORBIDDEN) {
    const hit = [...paths].find((p) => p === prefix || p.startsWith(prefix));
    if (hit) problems.push(`ships ${hit} (nothing under ${prefix} belongs in the package)`);
  }
  for (const path of paths) if (path.includes('.partial')) problems.push(`ships ${path}, a build's unfinished output`);
  for (const name of INSTALL_SCRIPTS) {
    if (manifest.scripts?.[name]) problems.push(`package.json scripts.${name} would run in consumers' installs`);
  }
  if (problems.length) throw new StepError('contents', problems.join('; '));
}

/**
 * The consumer's run directory: 2 RL steps in async mode (config.yaml), and a report.html that inlines
 * the installed package's build/ui/report.js (the shipped UI bundle, not one built on the spot).
 */
function checkRun(project, output) {
  const dir = join(project, 'runs/pack-check');
  const summaryFile = join(dir, 'summary.json');
  if (!existsSync(summaryFile)) throw new StepError('train', `no ${summaryFile}\n${tail(output)}`);
  const summary = JSON.parse(readFileSync(summaryFile, 'utf8'));
  const lines = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
  const steps = lines.map((line) => JSON.parse(line).step);
  if (summary.steps !== 2 || summary.mode !== 'async' || steps.filter((s) => s >= 1).length !== 2) {
    const got = `summary steps ${summary.steps}, mode ${summary.mode}; metrics steps ${steps.join(',')}`;
    throw new StepError('train', `${dir}: expected 2 async RL steps (config.yaml), got ${got}`);
  }
  const bundle = readFileSync(join(project, 'node_modules/arbor/build/ui/report.js'), 'utf8');
  const html = readFileSync(join(dir, 'report.html'), 'utf8');
  if (!html.includes(bundle.slice(0, 200))) throw new StepError('train', `${dir}/report.html lacks build/ui/report.js`);
  return { steps: summary.steps, mode: summary.mode, heldoutAccuracyEnd: summary.heldout_acc_end };
}

/** tsc's errors must all be in wrong-types.ts, and include its TS2322 (a number where a string belongs). */
export function checkTypeErrors({ code, output }) {
  const errors = output.split('\n').filter((line) => /\): error TS\d+/.test(line));
  const elsewhere = errors.filter((line) => !line.startsWith('wrong-types.ts('));
  const expected = errors.some((line) => /^wrong-types\.ts\(\d+,\d+\): error TS2322/.test(line));
  if (code === 0 || elsewhere.length || !expected) {
    const why = elsewhere.length ? 'errors outside wrong-types.ts' : 'no TS2322 in wrong-types.ts';
    throw new StepError('typecheck', `tsc -p tsconfig.check.json: ${why} (exit ${code})\n${tail(output)}`);
  }
  return errors.length;
}

/** The versions this repository's own install has (so the consumer's install is served by the cache). */
function installedVersion(repo, name) {
  return JSON.parse(readFileSync(join(repo, 'node_modules', name, 'package.json'), 'utf8')).version;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const fixture = join(dirname(fileURLToPath(import.meta.url)), '../testkit/package/consumer');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
  const work = mkdtempSync(join(tmpdir(), 'arbor-pack-'));
  if (!options.keep) workDir = work;
  const report = { ok: false, work, ms: {} };
  const started = Date.now();
  try {
    // 1. pack: prepare (kernels + UI) and prepack (declarations) run here, as on npm publish
    const packDir = join(work, 'pack');
    mkdirSync(packDir);
    const packArgs = ['pack', '--json', '--pack-destination', packDir];
    const pack = await mustRun('pack', npm, packArgs, options.repo, LIMIT_MS.pack);
    report.ms.pack = pack.ms;
    const entry = parsePackJson(pack.output);
    const tarball = join(packDir, entry.filename);
    if (!existsSync(tarball)) throw new StepError('pack', `npm pack named ${entry.filename} but wrote no ${tarball}`);
    const paths = new Set(entry.files.map((f) => f.path));
    const manifest = JSON.parse(readFileSync(join(options.repo, 'package.json'), 'utf8'));
    checkContents(paths, manifest);
    report.tarball = { file: entry.filename, bytes: entry.size, unpackedBytes: entry.unpackedSize, files: paths.size };

    // 2. an empty project: package.json, the user's task module, config and type-check files
    const project = join(work, 'project');
    mkdirSync(project);
    const consumer = { name: 'arbor-consumer', private: true, type: 'module' };
    writeFileSync(join(project, 'package.json'), JSON.stringify(consumer));
    cpSync(fixture, project, { recursive: true });
    const install = ['install', '--prefer-offline', '--no-audit', '--no-fund'];
    install.push('--fetch-retries=0', '--fetch-timeout=30000'); // a package missing from the cache fails fast
    report.ms.install = (await mustRun('install', npm, [...install, tarball], project, LIMIT_MS.install)).ms;
    for (const tool of ['assemblyscript', 'binaryen', 'uplot']) {
      if (existsSync(join(project, 'node_modules', tool))) {
        throw new StepError('install', `${tool} was installed: it is a build-time package, not a dependency`);
      }
    }

    // 3. the user's own config and TypeScript module through the installed `arbor` command
    const train = await mustRun('train', npx, ['--no', '--', 'arbor', 'train', 'config.yaml'], project, LIMIT_MS.train);
    report.ms.train = train.ms;
    report.train = checkRun(project, train.output);

    // 4. the declarations, in one tsc run (skipLibCheck off, so the shipped .d.ts are checked too):
    // the user's files are clean and wrong-types.ts fails for its own error, proving the types are not `any`
    const tools = [`typescript@${installedVersion(options.repo, 'typescript')}`];
    tools.push(`@types/node@${installedVersion(options.repo, '@types/node')}`);
    const installTools = await mustRun('typecheck', npm, [...install, '-D', ...tools], project, LIMIT_MS.install);
    report.ms.installTypescript = installTools.ms;
    cpSync(join(project, 'wrong-types.ts.fixture'), join(project, 'wrong-types.ts'));
    const files = ['my-task.ts', 'check-types.ts', 'wrong-types.ts'];
    writeFileSync(join(project, 'tsconfig.check.json'), JSON.stringify({ extends: './tsconfig.json', files }));
    const tscArgs = ['--no', '--', 'tsc', '-p', 'tsconfig.check.json'];
    const check = await run('typecheck', npx, tscArgs, project, LIMIT_MS.typecheck);
    report.ms.typecheck = check.ms;
    report.typeErrors = checkTypeErrors(check);
    report.ok = true;
  } catch (error) {
    report.step = error instanceof StepError ? error.step : 'internal';
    report.error = error instanceof Error ? error.message : String(error);
  } finally {
    for (const pid of live) killGroup(pid);
    if (!options.keep) rmSync(work, { recursive: true, force: true });
    report.ms.total = Date.now() - started;
  }
  const line = JSON.stringify(report);
  if (options.json) writeFileSync(options.json, line + '\n');
  console.log(line);
  if (!report.ok) {
    console.error(`pack-check FAILED at ${report.step}: ${report.error}`);
    process.exitCode = 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      for (const pid of live) killGroup(pid);
      if (workDir) rmSync(workDir, { recursive: true, force: true });
      process.exit(130);
    });
  }
  await main();
}
