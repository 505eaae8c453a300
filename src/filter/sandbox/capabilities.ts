/**
 * Probing which isolation layers this machine offers, once per process (cached):
 * - `prlimit` (util-linux) to apply rlimits (required);
 * - a network namespace: `unshare -n` as root, `unshare -rn` (user + network namespace) otherwise;
 * - dropping privileges: as root, `setpriv` switches to a fresh unprivileged uid/gid per run (so
 *   RLIMIT_NPROC is a per-run bound, nothing of the host is writable except world-writable places,
 *   and leftover processes can be found and killed by uid);
 * - the interpreters (python3, node) that actually start under those layers (e.g. a python3 under
 *   /root is not executable by the unprivileged uid, so /usr/bin/python3 is preferred).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface SandboxCapabilities {
  isRoot: boolean;
  prlimit: string | null;
  /** Prefix that puts the program into a fresh network namespace, or null when unavailable. */
  netns: string[] | null;
  /** setpriv path when root can drop to a per-run uid, else null. */
  setpriv: string | null;
  /** Extra setpriv flags that worked in the probe (no-new-privs, bounding set). */
  setprivFlags: string[];
  python: string | null;
  node: string | null;
  /** Why a layer is missing (for logs and the isolation report). */
  notes: string[];
}

/** The uid used by the probe; runs use a pool of uids above this base (see run.ts). */
export const SANDBOX_UID_BASE = 1_000_000;

function tryRun(
  file: string,
  args: string[],
  timeoutMs = 10_000,
): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { timeout: timeoutMs, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' } },
      (error, stdout, stderr) => {
        resolve({ ok: !error, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

async function which(name: string): Promise<string | null> {
  for (const dir of ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin', '/sbin']) {
    if (existsSync(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  const r = await tryRun('sh', ['-c', `command -v ${name}`]);
  const p = r.stdout.trim();
  return r.ok && p.startsWith('/') ? p : null;
}

let cached: Promise<SandboxCapabilities> | undefined;

/** Probe once per process; later calls return the cached result. */
export function probeCapabilities(): Promise<SandboxCapabilities> {
  cached ??= probe();
  return cached;
}

/** Forget the cached probe (tests). */
export function resetCapabilities(): void {
  cached = undefined;
}

async function probe(): Promise<SandboxCapabilities> {
  const notes: string[] = [];
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const prlimit = await which('prlimit');
  if (prlimit && !(await tryRun(prlimit, ['--cpu=5', '--', 'true'])).ok) notes.push('prlimit present but failed');
  if (!prlimit) notes.push('prlimit not found');

  let netns: string[] | null = null;
  const unshare = await which('unshare');
  if (unshare) {
    const prefix = isRoot ? [unshare, '-n', '--'] : [unshare, '-rn', '--'];
    if ((await tryRun(prefix[0], [...prefix.slice(1), 'true'])).ok) netns = prefix;
    else notes.push(`${prefix.slice(0, 2).join(' ')} failed: no network namespace`);
  } else notes.push('unshare not found: no network namespace');

  let setpriv: string | null = null;
  let setprivFlags: string[] = [];
  if (isRoot) {
    const sp = await which('setpriv');
    if (sp) {
      const id = String(SANDBOX_UID_BASE);
      const base = [`--reuid=${id}`, `--regid=${id}`, '--clear-groups'];
      for (const extra of [['--no-new-privs', '--bounding-set=-all'], ['--no-new-privs'], []]) {
        if ((await tryRun(sp, [...base, ...extra, '--', 'true'])).ok) {
          setpriv = sp;
          setprivFlags = extra;
          break;
        }
      }
      if (!setpriv) notes.push('setpriv failed: programs run as root');
    } else notes.push('setpriv not found: programs run as root');
  } else notes.push('not root: programs run as the current user');

  // An interpreter counts only if it starts as the sandbox user, inside the network namespace.
  const wrap = (interp: string, args: string[]): [string, string[]] => {
    const argv = [
      ...(netns ?? []),
      ...(setpriv
        ? [
            setpriv,
            `--reuid=${SANDBOX_UID_BASE}`,
            `--regid=${SANDBOX_UID_BASE}`,
            '--clear-groups',
            ...setprivFlags,
            '--',
          ]
        : []),
      interp,
      ...args,
    ];
    return [argv[0], argv.slice(1)];
  };
  const firstWorking = async (candidates: Array<string | null>, args: string[]): Promise<string | null> => {
    const seen = new Set<string>();
    for (const c of candidates) {
      if (!c || seen.has(c) || !existsSync(c)) continue;
      seen.add(c);
      const [f, a] = wrap(c, args);
      const r = await tryRun(f, a);
      if (r.ok && r.stdout.trim() === 'ok') return c;
    }
    return null;
  };
  const pathPython = await which('python3');
  const python = await firstWorking(
    ['/usr/bin/python3', '/usr/local/bin/python3', pathPython],
    ['-I', '-c', 'print("ok")'],
  );
  if (!python) notes.push('no python3 that starts inside the sandbox');
  const node = await firstWorking(
    [process.execPath, '/usr/bin/node', '/usr/local/bin/node', await which('node')],
    ['-e', 'console.log("ok")'],
  );
  if (!node) notes.push('no node that starts inside the sandbox');

  return { isRoot, prlimit, netns, setpriv, setprivFlags, python, node, notes };
}
