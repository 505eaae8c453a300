import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSandboxed } from '../../src/filter/sandbox/run.js';
import { resolveLimits } from '../../src/filter/sandbox/limits.js';
import { runHostileSuite } from '../../src/filter/sandbox/hostile.js';
import { ConfigError, SandboxError } from '../../src/core/errors.js';
import { loopbackListener } from './loopback.js';
import { probeCapabilities } from '../../src/filter/sandbox/capabilities.js';

const small = { wallMs: 3000, cpuSeconds: 1, memoryMB: 128, maxProcesses: 16, outputBytes: 64 * 1024 };

test('normal Python and JavaScript programs: stdout, stdin, exit codes, isolation report', async () => {
  const py = await runSandboxed({
    language: 'python',
    code: 'import sys\ndata = sys.stdin.read()\nprint(sum(int(x) for x in data.split()))\n',
    stdin: '1 2 3\n',
    limits: small,
  });
  assert.equal(py.exitCode, 0);
  assert.equal(py.stdout, '6\n');
  assert.equal(py.timedOut, false);
  assert.equal(py.isolation.rlimits, true);
  assert.equal(py.isolation.languageGuard, true);

  const js = await runSandboxed({
    language: 'javascript',
    code: "const s = require('fs').readFileSync(0, 'utf8');\nconsole.log(s.trim().split(/\\s+/).map(Number).reduce((a, b) => a + b, 0));\n",
    stdin: '4 5 6',
    limits: small,
  });
  assert.equal(js.exitCode, 0, js.stderr);
  assert.equal(js.stdout, '15\n');

  const esm = await runSandboxed({
    language: 'javascript',
    code: "import { readFileSync } from 'node:fs';\nconsole.log(readFileSync(0, 'utf8').length);\n",
    stdin: 'abc',
    limits: small,
  });
  assert.equal(esm.stdout, '3\n', esm.stderr);

  const exit = await runSandboxed({
    language: 'python',
    code: 'import sys\nprint("bye", file=sys.stderr)\nsys.exit(7)\n',
    limits: small,
  });
  assert.equal(exit.exitCode, 7);
  assert.match(exit.stderr, /bye/);
  const crash = await runSandboxed({ language: 'javascript', code: 'throw new Error("boom")', limits: small });
  assert.equal(crash.exitCode, 1);
  assert.match(crash.stderr, /boom/);

  // Files inside the temp dir are writable (it is the cwd, HOME and TMPDIR).
  const files = await runSandboxed({
    language: 'python',
    code:
      'import os, tempfile\nopen("a.txt", "w").write("x")\nwith tempfile.NamedTemporaryFile() as f: f.write(b"y")\n' +
      'print(open("a.txt").read(), os.environ["HOME"] == os.getcwd())\n',
    limits: small,
  });
  assert.equal(files.stdout, 'x True\n', files.stderr);
});

test('the temp dir is removed after the run (also after a kill)', async () => {
  const r = await runSandboxed({
    language: 'python',
    code: 'import os\nprint(os.getcwd())\nimport sys; sys.stdout.flush()\nwhile True: pass\n',
    limits: { ...small, wallMs: 1500 },
  });
  const dir = r.stdout.trim();
  assert.match(dir, /arbor-sbx-/);
  assert.equal(existsSync(dir), false);
  const ok = await runSandboxed({ language: 'javascript', code: 'console.log(process.cwd())', limits: small });
  assert.equal(existsSync(ok.stdout.trim()), false);
});

test('infinite loop returns soon after the wall limit and leaves nothing behind', async () => {
  const t = performance.now();
  const r = await runSandboxed({
    language: 'python',
    code: 'while True:\n    pass\n',
    limits: { ...small, cpuSeconds: 10, wallMs: 1500 },
  });
  const elapsed = performance.now() - t;
  assert.ok(elapsed < 3500, `took ${elapsed} ms (wall limit 1.5 s)`);
  assert.equal(r.timedOut, true);
  assert.equal(r.killedReason, 'wall');
  assert.throws(() => process.kill(-r.pid!, 0), /ESRCH/);
  const cpu = await runSandboxed({
    language: 'javascript',
    code: 'for (;;) {}',
    limits: { ...small, cpuSeconds: 1, wallMs: 8000 },
  });
  assert.equal(cpu.killedReason, 'cpu');
  assert.ok(cpu.wallMs < 8000, `CPU limit hit before the 8 s wall limit (took ${cpu.wallMs} ms)`);
});

test('no network: a connection to a loopback listener of the test fails and is never seen', async () => {
  const listener = await loopbackListener();
  const port = listener.port;
  try {
    for (const languageGuard of [true, false]) {
      const r = await runSandboxed({
        language: 'python',
        languageGuard,
        code:
          `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${port}), timeout=1)\n` +
          `    print("CONNECTED")\nexcept Exception as e:\n    print("BLOCKED", e)\n`,
        limits: small,
      });
      if (!languageGuard && r.isolation.network === 'none') continue; // no OS layer on this machine
      assert.match(r.stdout, /BLOCKED/);
    }
    await new Promise((res) => setTimeout(res, 50));
    listener.assertNoConnections('sandboxed program');
  } finally {
    listener.close();
  }
});

test('writes outside the temp dir fail; environment secrets do not reach the program', async () => {
  const outside = await mkdtemp(join(tmpdir(), 'arbor-sbx-test-'));
  const target = join(outside, 'pwned.txt');
  process.env.ARBOR_TEST_SECRET = 's3cret';
  try {
    const w = await runSandboxed({
      language: 'javascript',
      code: `try { require('fs').writeFileSync(${JSON.stringify(target)}, 'x'); console.log('WROTE'); } catch (e) { console.log('BLOCKED', e.code); }`,
      limits: small,
    });
    assert.match(w.stdout, /BLOCKED/);
    assert.equal(existsSync(target), false);
    const e = await runSandboxed({ language: 'python', code: 'import os\nprint(dict(os.environ))\n', limits: small });
    assert.ok(!e.stdout.includes('s3cret'));
    assert.match(e.stdout, /HOME/);
  } finally {
    delete process.env.ARBOR_TEST_SECRET;
    await rm(outside, { recursive: true, force: true });
  }
});

test('huge output is capped and the program killed', async () => {
  const r = await runSandboxed({
    language: 'python',
    code: 'while True:\n    print("x" * 10000)\n',
    limits: { ...small, outputBytes: 20_000 },
  });
  assert.equal(r.outputTruncated, true);
  assert.equal(r.killedReason, 'output');
  assert.ok(r.stdout.length <= 20_000);
});

test('abort signal kills the run', async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 300);
  const t = performance.now();
  const r = await runSandboxed({
    language: 'python',
    code: 'import time\ntime.sleep(30)\n',
    limits: { ...small, wallMs: 10_000 },
    signal: ac.signal,
  });
  assert.equal(r.killedReason, 'aborted');
  assert.ok(performance.now() - t < 5000, 'killed long before the 10 s wall limit');
});

test('limits are validated', () => {
  assert.throws(
    () => resolveLimits({ wallMs: -1 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'limits.wallMs' && /"wallMs"/.test(e.message),
  );
  assert.equal(resolveLimits({ cpuSeconds: 3 }).cpuSeconds, 3);
});

test('hostile suite: every case contained (an OS-layers-only case only where its layer exists)', async (t) => {
  const suite = await runHostileSuite();
  const caps = await probeCapabilities();
  // the "(OS layers only)" cases switch the language guard off, so they test one OS layer alone
  const layerPresent = (name: string): boolean => {
    if (!name.includes('(OS layers only)')) return true;
    if (name.startsWith('write outside')) return caps.isRoot && caps.setpriv !== null; // a per-run uid
    if (name.startsWith('network')) return caps.netns !== null;
    return caps.prlimit !== null;
  };
  for (const r of suite.results)
    if (!layerPresent(r.name))
      t.diagnostic(`not required here (layer missing): ${r.name} → ${r.contained ? 'contained' : 'NOT contained'}`);
  const failed = suite.results.filter((r) => !r.contained && layerPresent(r.name));
  assert.deepEqual(failed, [], JSON.stringify(failed, null, 2));
  assert.ok(suite.total >= 14);
  if (caps.isRoot && caps.setpriv && caps.netns && caps.prlimit)
    assert.equal(suite.contained, suite.total, 'with every layer present, all cases are contained');
});

test('a per-run uid that cannot reach $TMPDIR is a SandboxError naming the directory, not a failing program', async (t) => {
  const { unsearchableAncestor } = await import('../../src/filter/sandbox/temp-base.js');
  const base = await mkdtemp(join(tmpdir(), 'arbor-private-tmp-'));
  const saved = process.env.TMPDIR;
  t.after(async () => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    await rm(base, { recursive: true, force: true });
  });
  const inner = join(base, 'tmp');
  await mkdir(inner, { mode: 0o1777 });
  await chmod(inner, 0o1777);
  await chmod(base, 0o700); // mkdtemp's own mode, as a per-user TMPDIR has
  assert.deepEqual(await unsearchableAncestor(inner), { path: base, mode: 0o700 });
  await chmod(base, 0o711);
  assert.equal(await unsearchableAncestor(inner), null, 'searchable (o+x) is enough');
  await chmod(base, 0o700);

  const caps = await probeCapabilities();
  if (!(caps.isRoot && caps.setpriv && caps.prlimit)) {
    t.skip(`no per-run uid here (root ${caps.isRoot}, setpriv ${caps.setpriv !== null}): the check does not apply`);
    return;
  }
  process.env.TMPDIR = inner;
  await assert.rejects(
    runSandboxed({ language: 'python', code: 'print(1)\n', limits: small }),
    (e: unknown) =>
      e instanceof SandboxError &&
      e.message ===
        `sandbox setup failed: the per-run user cannot reach the temp directory ${inner}: ${base} (mode 0700) ` +
          'is not searchable by other users; point TMPDIR at a directory such as /tmp',
  );
  await chmod(base, 0o755);
  const ok = await runSandboxed({ language: 'python', code: 'print(1)\n', limits: small });
  assert.equal(ok.stdout, '1\n', ok.stderr);
});
