/**
 * The hostile-program suite: programs that try to escape or exhaust the sandbox, each run under
 * small limits, each with a check that verifies containment after the fact (not just "it returned").
 * Every case also checks that the call came back within wall + 2.5 s and that nothing of the run
 * survives (its process group is gone; with a per-run uid, no process of that uid remains).
 *
 * Safety: bounds are small (≤ 48 tasks, ≤ 256 MB address space for Python, ≤ 2 s CPU, ≤ 3 s wall);
 * the network case talks only to a listener on 127.0.0.1 opened here; the write case targets a
 * directory created here and the repository directory, and deletes anything that did get written.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, chmod } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  processesOfGroup,
  processesOfUid,
  processesWithMarker,
  runSandboxed,
  type SandboxLanguage,
  type SandboxResult,
} from './run.js';
import type { SandboxLimits } from './limits.js';

export interface HostileContext {
  port: number;
  /** A directory created by the suite (not writable by the sandbox uid). */
  outsideDir: string;
  /** The repository root. */
  repoDir: string;
  /** Random tag used in file names written by the write cases. */
  tag: string;
  secret: string;
  /** Connections the listener has accepted so far. */
  connections: () => number;
}

export interface HostileCase {
  name: string;
  language: SandboxLanguage;
  /** false: test the OS layers alone (no language guard). */
  languageGuard?: boolean;
  limits: Partial<SandboxLimits>;
  code: (ctx: HostileContext) => string;
  /** Paths that must not exist afterwards. */
  forbiddenPaths?: (ctx: HostileContext) => string[];
  /** Case-specific containment check; returns a failure description or null. */
  check: (r: SandboxResult, ctx: HostileContext) => string | null | Promise<string | null>;
}

export interface HostileResult {
  name: string;
  language: SandboxLanguage;
  contained: boolean;
  detail: string;
}

export interface HostileSuiteResult {
  contained: number;
  total: number;
  results: HostileResult[];
}

const small: Partial<SandboxLimits> = {
  wallMs: 3000,
  cpuSeconds: 1,
  memoryMB: 128,
  maxProcesses: 32,
  outputBytes: 64 * 1024,
  fileBytes: 1024 * 1024,
};

const mustBeKilled = (r: SandboxResult) =>
  r.signal || r.timedOut || r.killedReason ? null : `program was not stopped (exit ${r.exitCode})`;
const noMarker = (marker: string) => (r: SandboxResult) =>
  r.stdout.includes(marker) ? `program printed ${marker}: ${r.stdout.slice(0, 200)}` : null;

const py = {
  loop: 'while True:\n    pass\n',
  fork: 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n',
  forkSetsid:
    'import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.setsid()\n    except OSError:\n        time.sleep(0.01)\n',
  memory: 'a = []\nwhile True:\n    a.append(bytearray(10**7))\nprint("SURVIVED")\n',
  network: (port: number) =>
    `import socket\ntry:\n    s = socket.create_connection(("127.0.0.1", ${port}), timeout=2)\n` +
    `    print("CONNECTED")\nexcept Exception as e:\n    print("BLOCKED", type(e).__name__, e)\n`,
  write: (paths: string[]) =>
    `paths = ${JSON.stringify(paths)}\nfor p in paths:\n    try:\n        with open(p, "w") as f:\n` +
    `            f.write("pwned")\n        print("WROTE", p)\n    except Exception as e:\n` +
    `        print("BLOCKED", p, type(e).__name__)\n`,
  output: 'import sys\nwhile True:\n    sys.stdout.write("x" * 65536)\n',
  env:
    'import os\nprint(dict(os.environ))\ntry:\n' +
    '    print(open("/proc/%d/environ" % os.getppid(), "rb").read())\n' +
    'except Exception as e:\n    print("BLOCKED", type(e).__name__)\n',
};

const js = {
  loop: 'for (;;) {}\n',
  fork:
    "const cp = require('child_process');\nfor (;;) {\n" +
    "  try { cp.spawn(process.execPath, ['-e', 'for(;;){}'], { detached: true, stdio: 'ignore' }); } catch (e) {}\n" +
    '}\n',
  heap: 'const a = [];\nfor (;;) a.push(new Array(1e6).fill(1.5));\n',
  buffer: 'const a = [];\nfor (;;) a.push(Buffer.alloc(1e7, 1));\n',
  network: (port: number) =>
    `const net = require('net');\ntry {\n` +
    `  const s = net.connect(${port}, '127.0.0.1', () => { console.log('CONNECTED'); s.destroy(); });\n` +
    `  s.on('error', (e) => console.log('BLOCKED', e.code));\n` +
    `  setTimeout(() => { s.destroy(); }, 2000).unref();\n` +
    `} catch (e) { console.log('BLOCKED', e.code); }\n`,
  write: (paths: string[]) =>
    `const fs = require('fs');\nfor (const p of ${JSON.stringify(paths)}) {\n` +
    `  try { fs.writeFileSync(p, 'pwned'); console.log('WROTE', p); }` +
    ` catch (e) { console.log('BLOCKED', p, e.code); }\n` +
    `}\n`,
  output: "for (;;) process.stdout.write('x'.repeat(65536));\n",
  env:
    'console.log(JSON.stringify(process.env));\n' +
    "try { console.log(require('fs').readFileSync('/proc/' + process.ppid + '/environ', 'utf8')); }" +
    " catch (e) { console.log('BLOCKED', e.code); }\n",
};

const outsidePaths = (ctx: HostileContext, lang: string, worldWritable: boolean) => [
  join(ctx.outsideDir, `pwned-${lang}.txt`),
  join(ctx.repoDir, `arbor-pwned-${ctx.tag}-${lang}.txt`),
  ...(worldWritable ? [join(tmpdir(), `arbor-pwned-${ctx.tag}-${lang}.txt`)] : []),
];

const networkCheck = async (r: SandboxResult, ctx: HostileContext) => {
  await new Promise((res) => setTimeout(res, 50));
  if (ctx.connections() > 0) return `listener accepted ${ctx.connections()} connection(s)`;
  return noMarker('CONNECTED')(r);
};
const outputCheck = (r: SandboxResult) => {
  if (!r.outputTruncated) return 'output was not truncated';
  if (Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr) > 64 * 1024)
    return `captured ${r.stdout.length} bytes > cap`;
  return r.killedReason === 'output' ? null : `killedReason ${r.killedReason}`;
};
const envCheck = (r: SandboxResult, ctx: HostileContext) =>
  r.stdout.includes(ctx.secret) || r.stderr.includes(ctx.secret)
    ? 'secret leaked into the program'
    : r.stdout.includes('HOME')
      ? null
      : 'program did not print its environment';
const memoryCheck = (r: SandboxResult) => {
  if (r.stdout.includes('SURVIVED')) return 'allocation loop ended normally';
  if (r.exitCode === 0) return 'program exited 0';
  return r.killedReason === 'memory' || r.signal
    ? null
    : `stopped without a memory error (exit ${r.exitCode}, ${r.stderr.slice(-200)})`;
};

export const HOSTILE_CASES: HostileCase[] = [
  { name: 'infinite loop', language: 'python', limits: small, code: () => py.loop, check: mustBeKilled },
  { name: 'infinite loop', language: 'javascript', limits: small, code: () => js.loop, check: mustBeKilled },
  { name: 'fork bomb', language: 'python', limits: small, code: () => py.fork, check: mustBeKilled },
  {
    name: 'fork bomb (OS layers only)',
    language: 'python',
    languageGuard: false,
    limits: { ...small, wallMs: 1500 },
    code: () => py.fork,
    check: mustBeKilled,
  },
  {
    name: 'fork bomb with setsid escape (OS layers only)',
    language: 'python',
    languageGuard: false,
    limits: { ...small, wallMs: 1500 },
    code: () => py.forkSetsid,
    check: mustBeKilled,
  },
  { name: 'fork bomb', language: 'javascript', limits: small, code: () => js.fork, check: mustBeKilled },
  { name: 'memory bomb', language: 'python', limits: small, code: () => py.memory, check: memoryCheck },
  { name: 'memory bomb (heap)', language: 'javascript', limits: small, code: () => js.heap, check: memoryCheck },
  { name: 'memory bomb (buffers)', language: 'javascript', limits: small, code: () => js.buffer, check: memoryCheck },
  {
    name: 'network connection to 127.0.0.1',
    language: 'python',
    limits: small,
    code: (c) => py.network(c.port),
    check: networkCheck,
  },
  {
    name: 'network connection to 127.0.0.1 (OS layers only)',
    language: 'python',
    languageGuard: false,
    limits: small,
    code: (c) => py.network(c.port),
    check: networkCheck,
  },
  {
    name: 'network connection to 127.0.0.1',
    language: 'javascript',
    limits: small,
    code: (c) => js.network(c.port),
    check: networkCheck,
  },
  {
    name: 'network connection to 127.0.0.1 (OS layers only)',
    language: 'javascript',
    languageGuard: false,
    limits: small,
    code: (c) => js.network(c.port),
    check: networkCheck,
  },
  {
    name: 'write outside the temp dir',
    language: 'python',
    limits: small,
    code: (c) => py.write(outsidePaths(c, 'py', true)),
    forbiddenPaths: (c) => outsidePaths(c, 'py', true),
    check: noMarker('WROTE'),
  },
  {
    name: 'write outside the temp dir (OS layers only)',
    language: 'python',
    languageGuard: false,
    limits: small,
    code: (c) => py.write(outsidePaths(c, 'py2', false)),
    forbiddenPaths: (c) => outsidePaths(c, 'py2', false),
    check: noMarker('WROTE'),
  },
  {
    name: 'write outside the temp dir',
    language: 'javascript',
    limits: small,
    code: (c) => js.write(outsidePaths(c, 'js', true)),
    forbiddenPaths: (c) => outsidePaths(c, 'js', true),
    check: noMarker('WROTE'),
  },
  { name: 'huge output', language: 'python', limits: small, code: () => py.output, check: outputCheck },
  { name: 'huge output', language: 'javascript', limits: small, code: () => js.output, check: outputCheck },
  { name: 'read environment secrets', language: 'python', limits: small, code: () => py.env, check: envCheck },
  { name: 'read environment secrets', language: 'javascript', limits: small, code: () => js.env, check: envCheck },
];

/**
 * The program's process group is gone: kill(-pgid, 0) fails with ESRCH. Killed orphans are reaped by
 * init, which can take a moment; dead-but-unreaped members (zombies) hold no resources and run no
 * code, so a group with only zombies left after 2 s counts as gone (reported in the detail).
 */
async function groupGone(pid: number | null): Promise<{ gone: boolean; note?: string }> {
  if (!pid) return { gone: true };
  const deadline = performance.now() + 2000;
  for (;;) {
    try {
      process.kill(-pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') return { gone: true };
    }
    if (performance.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const { live, zombies } = await processesOfGroup(pid);
  return live.length
    ? { gone: false, note: `${live.length} live process(es) in group ${pid}` }
    : { gone: true, note: `${zombies} zombie(s) awaiting reaping` };
}

/** Run every case (sequentially) and verify containment. Never throws for a case that fails. */
export async function runHostileSuite(options: { cases?: HostileCase[] } = {}): Promise<HostileSuiteResult> {
  const cases = options.cases ?? HOSTILE_CASES;
  let connections = 0;
  const server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const outsideDir = await mkdtemp(join(tmpdir(), 'arbor-hostile-'));
  await chmod(outsideDir, 0o755);
  const secret = 's3cret';
  const previousSecret = process.env.ARBOR_TEST_SECRET;
  process.env.ARBOR_TEST_SECRET = secret;
  const ctx: HostileContext = {
    port: (server.address() as AddressInfo).port,
    outsideDir,
    repoDir: fileURLToPath(new URL('../../../', import.meta.url)).replace(/\/$/, ''),
    tag: randomBytes(4).toString('hex'),
    secret,
    connections: () => connections,
  };
  const results: HostileResult[] = [];
  try {
    for (const c of cases) {
      const before = connections;
      const started = performance.now();
      let detail: string;
      let contained = false;
      try {
        const r = await runSandboxed({
          language: c.language,
          code: c.code(ctx),
          limits: c.limits,
          languageGuard: c.languageGuard,
        });
        const elapsed = performance.now() - started;
        const problems: string[] = [];
        const notes: string[] = [];
        const wall = r.wallMs;
        if (elapsed > (c.limits.wallMs ?? 10_000) + 2500) problems.push(`call took ${Math.round(elapsed)} ms`);
        const group = await groupGone(r.pid);
        if (!group.gone) problems.push(group.note ?? 'process group still alive');
        else if (group.note) notes.push(group.note);
        if (r.isolation.perRunUid && r.isolation.uid !== null) {
          const left = await processesOfUid(r.isolation.uid);
          if (left.length) problems.push(`${left.length} process(es) of uid ${r.isolation.uid} survived`);
        } else if (r.runMarker) {
          const left = await processesWithMarker(r.runMarker);
          if (left.length) problems.push(`${left.length} process(es) of the run survived`);
        }
        for (const p of c.forbiddenPaths?.(ctx) ?? []) {
          if (existsSync(p)) {
            problems.push(`wrote ${p}`);
            await rm(p, { force: true });
          }
        }
        const specific = await c.check(r, { ...ctx, connections: () => connections - before });
        if (specific) problems.push(specific);
        contained = problems.length === 0;
        const how = [
          r.killedReason && `killed: ${r.killedReason}`,
          r.signal && `signal ${r.signal}`,
          r.exitCode !== null && `exit ${r.exitCode}`,
          `${wall} ms`,
        ]
          .filter(Boolean)
          .join(', ');
        const evidence = (r.stdout.split('\n').find((l) => /BLOCKED/.test(l)) ?? '').slice(0, 160);
        detail = contained
          ? `contained (${how})${evidence ? `; ${evidence}` : ''}${notes.length ? `; ${notes.join('; ')}` : ''}`
          : `NOT contained: ${problems.join('; ')} (${how})`;
      } catch (error) {
        detail = `NOT verified: sandbox error ${(error as Error).message}`;
      }
      results.push({ name: c.name, language: c.language, contained, detail });
    }
  } finally {
    if (previousSecret === undefined) delete process.env.ARBOR_TEST_SECRET;
    else process.env.ARBOR_TEST_SECRET = previousSecret;
    await new Promise<void>((res) => server.close(() => res()));
    await rm(outsideDir, { recursive: true, force: true });
  }
  return { contained: results.filter((r) => r.contained).length, total: results.length, results };
}
