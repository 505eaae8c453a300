/**
 * Running the hand-written PyTorch reference of HF models (testkit/reference/hf_torch.py): find an
 * interpreter that imports torch (ARBOR_TORCH_PYTHON alone when set, else Debian's /usr/bin/python3,
 * then python3), pass a job on stdin, parse the JSON answer. An interpreter without torch moves on to the
 * next; any other failure throws (a broken reference must never look like a skip). For speed runs the
 * BLAS can be pointed at OpenBLAS without touching the system's alternatives (`torchEnv`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { arch } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EngineCallError } from '../../src/core/errors.js';
import { pythonCandidates } from '../reference/parity.js';

export const HF_TORCH_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '..', 'reference', 'hf_torch.py');

export type HfTorchMode = 'reference' | 'sample' | 'train' | 'gemm';

/** Fields every answer carries. */
export interface HfTorchInfo {
  torch: string;
  threads: number;
  /** The BLAS library the Python process mapped. */
  blas: string;
  /** Peak RSS of the Python process (MB). */
  max_rss_mb: number;
}

// torch needs numpy: an interpreter without either has no usable torch (Debian's python3-torch brings both)
const NO_TORCH = /No module named '?(torch|numpy)'?(?![\w.])|ENOENT/;

/** Where OpenBLAS's libblas.so.3 lives: ARBOR_TORCH_BLAS_DIR, else Debian's libopenblas0-pthread directory. */
export function openblasDir(): string | undefined {
  const multiarch = arch() === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';
  const candidates = [process.env.ARBOR_TORCH_BLAS_DIR, `/usr/lib/${multiarch}/openblas-pthread`];
  return candidates.find((d): d is string => !!d && existsSync(join(d, 'libblas.so.3')));
}

/**
 * Environment for a timed PyTorch run at `threads` threads (OpenMP and OpenBLAS pools alike). OpenMP
 * threads sleep when idle (OMP_WAIT_POLICY=PASSIVE): with GOMP's default spinning, two threads sampled 5×
 * slower than one on a shared 2-core VM. With `openblas`, Debian's torch (which links whatever
 * libblas.so.3 resolves to, the reference BLAS by default) loads OpenBLAS through LD_LIBRARY_PATH when
 * `openblasDir()` finds it.
 */
export function torchEnv(threads: number, openblas: boolean): Record<string, string> {
  const n = String(threads);
  const env: Record<string, string> = {
    OMP_NUM_THREADS: n,
    OPENBLAS_NUM_THREADS: n,
    MKL_NUM_THREADS: n,
    OMP_WAIT_POLICY: 'PASSIVE',
  };
  const dir = openblas ? openblasDir() : undefined;
  if (dir) env.LD_LIBRARY_PATH = [dir, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  return env;
}

/** One job through the first interpreter with torch; `{ ok: false, reason }` when none imports it. */
export function runHfTorch<T>(
  mode: HfTorchMode,
  job: unknown,
  env: Record<string, string> = {},
  pythons = pythonCandidates(),
): { ok: true; python: string; out: T & HfTorchInfo } | { ok: false; reason: string } {
  const tried: string[] = [];
  for (const python of pythons) {
    const r = spawnSync(python, [HF_TORCH_SCRIPT, mode], {
      input: JSON.stringify(job),
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      timeout: 1_800_000,
      env: { ...process.env, ...env },
    });
    const failure = r.error ? r.error.message : r.status !== 0 ? (r.stderr || '').trim() : undefined;
    if (failure === undefined) return { ok: true, python, out: JSON.parse(r.stdout) as T & HfTorchInfo };
    const missing = failure.match(NO_TORCH);
    if (!missing) {
      const why = `exit ${r.status ?? r.signal}`;
      throw new EngineCallError(`${HF_TORCH_SCRIPT} ${mode} failed with ${python} (${why}): ${failure.slice(-3000)}`, {
        isRetryable: false,
      });
    }
    tried.push(`${python}: ${missing[0]}`);
  }
  const install = 'install it with `apt-get install python3-torch`';
  return { ok: false, reason: `PyTorch is not importable (${tried.join('; ')}); ${install}` };
}
