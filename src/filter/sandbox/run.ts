/**
 * Running an untrusted Python or JavaScript program under layered isolation:
 *
 * 1. a private temp dir (mkdtemp, mode 0700, owned by the sandbox uid) as cwd, HOME and TMPDIR,
 *    removed afterwards (also on error);
 * 2. a scrubbed environment (PATH, HOME, TMPDIR, LANG/LC_ALL and a few interpreter switches only);
 * 3. a fresh network namespace (`unshare -n`, or `-rn` when not root): no interface but a down
 *    loopback, so no connection to the host or anywhere else;
 * 4. as root, a fresh unprivileged uid/gid per run (`setpriv`), so files of the host are not
 *    writable, RLIMIT_NPROC bounds this run alone, and survivors can be found and killed by uid;
 * 5. rlimits through `prlimit` (address space, CPU, processes, file size, open files, no core);
 * 6. its own process group (`detached`), SIGKILLed as a whole on wall timeout, output overflow or
 *    abort, and again after a normal exit to catch orphans (fork-bomb children);
 * 7. language guards (see guards.ts) as a second layer, on by default.
 *
 * `runSandboxed` never throws because of the program (failures are in the result); it throws
 * SandboxError only when the sandbox cannot be set up (no prlimit, no working interpreter...).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SandboxError } from '../../core/errors.js';
import { probeCapabilities, SANDBOX_UID_BASE, type SandboxCapabilities } from './capabilities.js';
import { JS_GUARD, JS_GUARD_FILE, PYTHON_GUARD, PYTHON_GUARD_FILE } from './guards.js';
import { sandboxTempBase } from './temp-base.js';
import { JS_ADDRESS_SPACE_OVERHEAD_MB, JS_THREAD_ALLOWANCE, resolveLimits, type SandboxLimits } from './limits.js';

export type SandboxLanguage = 'python' | 'javascript';

export interface SandboxRequest {
  language: SandboxLanguage;
  code: string;
  stdin?: string;
  args?: string[];
  limits?: Partial<SandboxLimits>;
  /** Install the language guard (default true). Turn off only to test the OS layers alone. */
  languageGuard?: boolean;
  /** Extra files written next to the program (name → content); names must be plain file names. */
  files?: Record<string, string>;
  signal?: AbortSignal;
}

export type KilledReason = 'wall' | 'cpu' | 'memory' | 'output' | 'file_size' | 'aborted' | 'signal';

export interface IsolationReport {
  /** 'netns' (own network namespace), 'userns+netns', or 'guard-only'/'none'. */
  network: 'netns' | 'userns+netns' | 'guard-only' | 'none';
  /** The uid the program ran as, and whether it is a fresh per-run uid. */
  uid: number | null;
  perRunUid: boolean;
  rlimits: boolean;
  processGroup: true;
  envScrubbed: true;
  privateTempDir: true;
  languageGuard: boolean;
  notes: string[];
}

export interface SandboxResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  outputTruncated: boolean;
  killedReason?: KilledReason;
  wallMs: number;
  /** pid (= process group id) of the program, for after-the-fact checks. */
  pid: number | null;
  /** Value of ARBOR_SANDBOX_RUN in the program's environment (finds its processes without a per-run uid). */
  runMarker: string;
  isolation: IsolationReport;
}

const usedSlots = new Set<number>();
const SLOTS = 256;
let nextSlot = 0;

/**
 * A uid no other live run uses: base + a block derived from this process's pid + a slot. Slots
 * rotate (a uid is not reused right away) and a uid that still has processes, zombies included, is
 * skipped: unreaped zombies of a fork bomb still count against RLIMIT_NPROC of their uid.
 */
async function acquireUid(): Promise<{ uid: number; release: () => void }> {
  const taken = new Set((await listProcesses()).map((p) => p.uid));
  for (let i = 0; i < SLOTS; i++) {
    const s = (nextSlot + i) % SLOTS;
    const uid = SANDBOX_UID_BASE + 1 + (process.pid % 15_000) * SLOTS + s;
    if (usedSlots.has(s) || taken.has(uid)) continue;
    usedSlots.add(s);
    nextSlot = (s + 1) % SLOTS;
    return { uid, release: () => usedSlots.delete(s) };
  }
  throw new SandboxError(
    `sandbox: no free sandbox uid (more than ${SLOTS} concurrent or unreaped runs in one process)`,
  );
}

interface ProcInfo {
  pid: number;
  uid: number;
  pgid: number;
  /** Tasks (threads) of the process: RLIMIT_NPROC counts these. */
  threads: number;
  zombie: boolean;
}

async function listProcesses(): Promise<ProcInfo[]> {
  const out: ProcInfo[] = [];
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return out;
  }
  await Promise.all(
    entries.map(async (e) => {
      if (!/^\d+$/.test(e)) return;
      try {
        const status = await readFile(`/proc/${e}/status`, 'utf8');
        const u = /^Uid:\s+(\d+)/m.exec(status);
        const g = /^NSpgid:\s+(\d+)/m.exec(status);
        const st = /^State:\s+(\S)/m.exec(status);
        const t = /^Threads:\s+(\d+)/m.exec(status);
        if (u)
          out.push({
            pid: Number(e),
            uid: Number(u[1]),
            pgid: g ? Number(g[1]) : -1,
            threads: t ? Number(t[1]) : 1,
            zombie: st?.[1] === 'Z' || st?.[1] === 'X',
          });
      } catch {
        /* gone */
      }
    }),
  );
  return out;
}

/** Pids of live (non-zombie) processes whose real uid is `uid` (Linux /proc). */
export async function processesOfUid(uid: number): Promise<number[]> {
  return (await listProcesses()).filter((p) => p.uid === uid && !p.zombie).map((p) => p.pid);
}

/** Live (non-zombie) members of process group `pgid`, and how many zombies it still has. */
export async function processesOfGroup(pgid: number): Promise<{ live: number[]; zombies: number }> {
  const members = (await listProcesses()).filter((p) => p.pgid === pgid);
  return { live: members.filter((p) => !p.zombie).map((p) => p.pid), zombies: members.filter((p) => p.zombie).length };
}

/** Number of tasks (threads included) the current user has: RLIMIT_NPROC counts these. */
async function currentUserTasks(): Promise<number> {
  const uid = process.getuid?.() ?? -1;
  const procs = await listProcesses();
  if (!procs.length) return 4096; // no /proc: assume many, so the limit stays generous
  return procs.filter((p) => p.uid === uid).reduce((n, p) => n + p.threads, 0);
}

function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}

/**
 * SIGKILL every process of the per-run uid until none is left (they may still be forking, and may
 * have left the process group with setsid). Each round runs `kill -KILL -1` as that uid, which the
 * kernel delivers to every process of the uid in one pass, then kills stragglers one by one.
 */
async function sweepUid(uid: number, setpriv: string | null): Promise<void> {
  for (let round = 0; round < 30; round++) {
    const pids = await processesOfUid(uid);
    if (!pids.length) return;
    if (setpriv) {
      await new Promise<void>((resolve) => {
        const k = spawn(setpriv, [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'kill', '-KILL', '-1'], {
          stdio: 'ignore',
          env: { PATH: '/usr/bin:/bin' },
        });
        k.once('error', () => resolve());
        k.once('exit', () => resolve());
      });
    }
    for (const p of pids) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Live processes of the current user whose initial environment carries the run's marker. */
export async function processesWithMarker(marker: string): Promise<number[]> {
  const self = process.getuid?.();
  const mine = (await listProcesses()).filter((p) => p.uid === self && p.pid !== process.pid && !p.zombie);
  const hits: number[] = [];
  await Promise.all(
    mine.map(async (p) => {
      try {
        if ((await readFile(`/proc/${p.pid}/environ`, 'latin1')).includes(`ARBOR_SANDBOX_RUN=${marker}`))
          hits.push(p.pid);
      } catch {
        /* gone or not ours */
      }
    }),
  );
  return hits;
}

/**
 * Without a per-run uid (not root), processes that left the group (setsid) are found by a marker in
 * their initial environment (/proc/PID/environ) and killed. A program can overwrite that memory,
 * so this is best effort; with a per-run uid the uid sweep above is exhaustive.
 */
async function sweepMarker(marker: string): Promise<void> {
  for (let round = 0; round < 30; round++) {
    const hits = await processesWithMarker(marker);
    if (!hits.length) return;
    for (const pid of hits) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

const MEMORY_MARKERS = [
  /MemoryError/,
  /heap out of memory/i,
  /std::bad_alloc/,
  /Cannot allocate memory/,
  /ERR_MEMORY_ALLOCATION_FAILED/,
  /Array buffer allocation failed/,
  /Allocation failed/,
];

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason;
  if (reason instanceof Error) return reason;
  const e = new Error('sandbox run aborted');
  e.name = 'AbortError';
  return e;
}

/** Run `code` under the sandbox; see the module comment for the layers. */
export async function runSandboxed(request: SandboxRequest): Promise<SandboxResult> {
  const limits = resolveLimits(request.limits);
  const caps = await probeCapabilities();
  if (!caps.prlimit)
    throw new SandboxError(`sandbox unavailable: prlimit (util-linux) not found; ${caps.notes.join('; ')}`);
  const interpreter = request.language === 'python' ? caps.python : caps.node;
  if (!interpreter) {
    throw new SandboxError(
      `sandbox unavailable: no ${request.language === 'python' ? 'python3' : 'node'} interpreter starts inside the sandbox (${caps.notes.join('; ')})`,
    );
  }
  if (request.signal?.aborted) throw abortError(request.signal);
  const guard = request.languageGuard !== false;
  const slot = caps.setpriv ? await acquireUid() : null;
  const uid = slot?.uid ?? process.getuid?.() ?? null;
  const isolation: IsolationReport = {
    network: caps.netns ? (caps.isRoot ? 'netns' : 'userns+netns') : guard ? 'guard-only' : 'none',
    uid,
    perRunUid: !!slot,
    rlimits: true,
    processGroup: true,
    envScrubbed: true,
    privateTempDir: true,
    languageGuard: guard,
    notes: caps.notes,
  };

  let dir: string | undefined;
  try {
    dir = await mkdtemp(join(await sandboxTempBase(!!slot), 'arbor-sbx-'));
    await chmod(dir, 0o700);
    const argv = await prepare(request, limits, caps, dir, interpreter, guard, slot?.uid ?? null);
    if (slot) await chown(dir, slot.uid, slot.uid);
    return await execute(argv, request, limits, dir, slot?.uid ?? null, caps.setpriv, isolation);
  } catch (error) {
    if (
      error instanceof SandboxError ||
      (error as Error)?.name === 'AbortError' ||
      (error as Error)?.name === 'ConfigError'
    )
      throw error;
    throw new SandboxError(`sandbox setup failed: ${(error as Error)?.message ?? error}`, { cause: error });
  } finally {
    slot?.release();
    if (dir) await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  }
}

async function prepare(
  request: SandboxRequest,
  limits: SandboxLimits,
  caps: SandboxCapabilities,
  dir: string,
  interpreter: string,
  guard: boolean,
  uid: number | null,
): Promise<string[]> {
  const js = request.language === 'javascript';
  for (const [name, content] of Object.entries(request.files ?? {})) {
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name) || name.startsWith('_arbor_'))
      throw new SandboxError(`sandbox: bad extra file name "${name}"`);
    await writeFile(join(dir, name), content);
  }
  let main: string;
  if (js) {
    main = /^\s*(import\s[^(]|export\s)/m.test(request.code) ? 'main.mjs' : 'main.cjs';
  } else main = 'main.py';
  await writeFile(join(dir, main), request.code);

  const memMB = js ? limits.memoryMB + JS_ADDRESS_SPACE_OVERHEAD_MB : limits.memoryMB;
  let nproc = limits.maxProcesses + (js ? JS_THREAD_ALLOWANCE : 0);
  if (uid === null) nproc += await currentUserTasks();
  const rl = [
    caps.prlimit!,
    `--as=${memMB * 1024 * 1024}`,
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    `--nproc=${nproc}`,
    `--fsize=${limits.fileBytes}`,
    `--nofile=${limits.openFiles}`,
    '--core=0',
    '--',
  ];
  const drop =
    uid !== null && caps.setpriv
      ? [caps.setpriv, `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', ...caps.setprivFlags, '--']
      : [];
  let program: string[];
  if (js) {
    const flags = [`--max-old-space-size=${limits.memoryMB}`, '--disable-warning=ExperimentalWarning'];
    if (guard) {
      await writeFile(join(dir, JS_GUARD_FILE), JS_GUARD);
      flags.push(
        '--experimental-permission',
        '--allow-fs-read=*',
        `--allow-fs-write=${dir}/`,
        '--require',
        join(dir, JS_GUARD_FILE),
      );
    }
    program = [interpreter, ...flags, join(dir, main), ...(request.args ?? [])];
  } else {
    if (guard) {
      await writeFile(join(dir, PYTHON_GUARD_FILE), PYTHON_GUARD);
      program = [interpreter, '-I', '-B', join(dir, PYTHON_GUARD_FILE), join(dir, main), ...(request.args ?? [])];
    } else program = [interpreter, '-I', '-B', join(dir, main), ...(request.args ?? [])];
  }
  return [...(caps.netns ?? []), ...rl, ...drop, ...program];
}

/** The program's whole environment: a fixed PATH, its directory as home and temp, UTF-8, the run's marker. */
function sandboxEnv(dir: string, marker: string): Record<string, string> {
  return {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: dir,
    TMPDIR: dir,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONIOENCODING: 'utf-8',
    PYTHONHASHSEED: '0',
    UV_THREADPOOL_SIZE: '2',
    ARBOR_SANDBOX_RUN: marker,
  };
}

/** Which limit ended a program that we did not kill, from its exit status and stderr (undefined: none). */
function exitReason(code: number | null, sig: NodeJS.Signals | null, stderr: string): KilledReason | undefined {
  if (sig === 'SIGXCPU') return 'cpu';
  if (sig === 'SIGXFSZ') return 'file_size';
  if ((code !== 0 || sig) && MEMORY_MARKERS.some((m) => m.test(stderr))) return 'memory';
  if (sig === 'SIGKILL') return 'cpu'; // hard RLIMIT_CPU (or the OOM killer)
  if (sig) return 'signal';
  return undefined;
}

function execute(
  argv: string[],
  request: SandboxRequest,
  limits: SandboxLimits,
  dir: string,
  uid: number | null,
  setpriv: string | null,
  isolation: IsolationReport,
): Promise<SandboxResult> {
  const marker = `run-${process.pid}-${randomBytes(8).toString('hex')}`;
  const env = sandboxEnv(dir, marker);
  const started = performance.now();
  return new Promise<SandboxResult>((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: dir, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const pid = child.pid;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let total = 0;
    let truncated = false;
    let timedOut = false;
    let aborted = false;
    let killedByUs: KilledReason | undefined;
    let settled = false;

    const killAll = (reason: KilledReason) => {
      killedByUs ??= reason;
      killGroup(pid);
      if (uid !== null) void sweepUid(uid, setpriv);
      else void sweepMarker(marker);
    };
    const onData = (sink: Buffer[]) => (chunk: Buffer) => {
      if (truncated) return;
      const room = limits.outputBytes - total;
      if (chunk.length > room) {
        if (room > 0) sink.push(chunk.subarray(0, room));
        total = limits.outputBytes;
        truncated = true;
        killAll('output');
        return;
      }
      sink.push(chunk);
      total += chunk.length;
    };
    child.stdout.on('data', onData(out));
    child.stderr.on('data', onData(err));
    child.stdin.on('error', () => undefined);
    child.stdout.on('error', () => undefined);
    child.stderr.on('error', () => undefined);

    const timer = setTimeout(() => {
      timedOut = true;
      killAll('wall');
    }, limits.wallMs);
    const onAbort = () => {
      aborted = true;
      killAll('aborted');
    };
    request.signal?.addEventListener('abort', onAbort, { once: true });

    const finish = async (code: number | null, sig: NodeJS.Signals | null, spawnError?: Error) => {
      if (settled) return;
      settled = true;
      // Orphans (e.g. fork-bomb children) may still hold the pipes: kill the group and the uid.
      killGroup(pid);
      if (uid !== null) await sweepUid(uid, setpriv);
      else await sweepMarker(marker);
      await new Promise<void>((r) => {
        if (child.stdout.readableEnded && child.stderr.readableEnded) return r();
        const t = setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          r();
        }, 500);
        child.once('close', () => {
          clearTimeout(t);
          r();
        });
      });
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
      if (spawnError) {
        reject(new SandboxError(`sandbox: cannot start ${argv[0]}: ${spawnError.message}`, { cause: spawnError }));
        return;
      }
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      const killedReason: KilledReason | undefined = aborted
        ? 'aborted'
        : (killedByUs ?? exitReason(code, sig, stderr));
      resolve({
        exitCode: code,
        signal: sig,
        stdout,
        stderr,
        timedOut,
        outputTruncated: truncated,
        ...(killedReason ? { killedReason } : {}),
        wallMs: Math.round(performance.now() - started),
        pid: pid ?? null,
        runMarker: marker,
        isolation,
      });
    };
    child.once('error', (e) => void finish(null, null, e));
    child.once('exit', (code, sig) => void finish(code, sig));
    if (request.stdin !== undefined && request.stdin.length) child.stdin.end(request.stdin);
    else child.stdin.end();
  });
}
