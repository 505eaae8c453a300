/**
 * Where the time goes, kernel by kernel: KernelProfiler wraps every function of a Kernels object with a
 * wall-clock timer (per kernel, and per GEMM shape M×K×N with its GFLOP/s); profileDecodeStep times
 * batched decode forwards through the sampler's forward path (forwardRows, paged KV cache). Times are
 * wall time of the calling thread, so with kernel threads they include the workers' share of each call.
 * Used by bench/hf.ts; it measures, it does not judge.
 */
import type { Kernels } from '../../src/engine/kernels/types.js';
import { DecodeWorkspace, forwardRows } from '../../src/engine/model/decode.js';
import { PagedKVCache } from '../../src/engine/model/kvcache.js';
import type { NanoModel } from '../../src/engine/model/model.js';

export interface KernelStat {
  kernel: string;
  calls: number;
  ms: number;
}

export interface GemmStat {
  /** matmul, matmulBT or matmulAT. */
  op: string;
  M: number;
  K: number;
  N: number;
  calls: number;
  ms: number;
  /** 2·M·K·N per call over the time. */
  gflops: number;
}

export interface ProfileSnapshot {
  /** Wall time of what was profiled (ms). */
  wallMs: number;
  /** Time inside kernel calls (ms). */
  kernelMs: number;
  /** wallMs − kernelMs: JavaScript outside the kernels (gathers, embedding, sampling, bookkeeping). */
  otherMs: number;
  /** Per kernel, slowest first. */
  kernels: KernelStat[];
  /** Per GEMM shape, slowest first. */
  gemm: GemmStat[];
  /** GEMM work (GFLOP) and its rate over the whole wall time (GFLOP/s). */
  gemmGflop: number;
  gemmGflopsOverWall: number;
}

const GEMMS = new Set(['matmul', 'matmulBT', 'matmulAT']);

export class KernelProfiler {
  /** The wrapped kernels: give these to the model. */
  readonly kernels: Kernels;
  private byKernel = new Map<string, { calls: number; ms: number }>();
  private byShape = new Map<string, GemmStat>();

  constructor(base: Kernels) {
    const wrapped = { ...base } as Record<string, unknown>;
    for (const [name, fn] of Object.entries(base)) {
      if (typeof fn !== 'function' || name === 'alloc') continue;
      const call = fn as (...args: unknown[]) => unknown;
      wrapped[name] = (...args: unknown[]) => {
        const t = performance.now();
        const out = call(...args);
        this.record(name, performance.now() - t, args);
        return out;
      };
    }
    this.kernels = wrapped as unknown as Kernels;
  }

  private record(name: string, ms: number, args: unknown[]): void {
    const k = this.byKernel.get(name) ?? { calls: 0, ms: 0 };
    k.calls++;
    k.ms += ms;
    this.byKernel.set(name, k);
    if (!GEMMS.has(name)) return;
    const [M, K, N] = args.slice(3, 6) as number[];
    const key = `${name} ${M} ${K} ${N}`;
    const g = this.byShape.get(key) ?? { op: name, M, K, N, calls: 0, ms: 0, gflops: 0 };
    g.calls++;
    g.ms += ms;
    this.byShape.set(key, g);
  }

  reset(): void {
    this.byKernel.clear();
    this.byShape.clear();
  }

  /** A copy of the totals so far, for `snapshot(…, since)`. */
  mark(): ProfileMark {
    const copy = <T extends object>(m: Map<string, T>) => new Map([...m].map(([k, v]) => [k, { ...v }]));
    return { byKernel: copy(this.byKernel), byShape: copy(this.byShape) };
  }

  /**
   * The totals since the last reset (or since `since`), over `wallMs` of wall time, divided by `per` (an
   * average over steps).
   */
  snapshot(wallMs: number, per = 1, since?: ProfileMark): ProfileSnapshot {
    const minus = <T extends { calls: number; ms: number }>(m: Map<string, T>, before?: Map<string, T>) =>
      [...m]
        .map(([key, v]) => {
          const b = before?.get(key);
          return [key, { ...v, calls: v.calls - (b?.calls ?? 0), ms: v.ms - (b?.ms ?? 0) }] as const;
        })
        .filter(([, v]) => v.calls > 0);
    const kernels = minus(this.byKernel, since?.byKernel).map(([kernel, k]) => ({
      kernel,
      calls: k.calls / per,
      ms: k.ms / per,
    }));
    kernels.sort((a, b) => b.ms - a.ms);
    const gemm = minus(this.byShape, since?.byShape).map(([, g]) => {
      const gflops = (2 * g.M * g.K * g.N * g.calls) / (g.ms / 1000) / 1e9;
      return { ...g, calls: g.calls / per, ms: g.ms / per, gflops };
    });
    gemm.sort((a, b) => b.ms - a.ms);
    const kernelMs = kernels.reduce((sum, k) => sum + k.ms, 0);
    const gemmGflop = gemm.reduce((sum, g) => sum + (2 * g.M * g.K * g.N * g.calls) / 1e9, 0);
    const wall = wallMs / per;
    const gemmGflopsOverWall = gemmGflop / (wall / 1000);
    return { wallMs: wall, kernelMs, otherMs: wall - kernelMs, kernels, gemm, gemmGflop, gemmGflopsOverWall };
  }
}

/** Totals at one moment (KernelProfiler.mark). */
export interface ProfileMark {
  byKernel: Map<string, { calls: number; ms: number }>;
  byShape: Map<string, GemmStat>;
}

/** One batched decode forward: kernels, plus the JavaScript KV-cache copies around them. */
export interface DecodeStepProfile extends ProfileSnapshot {
  /** Rows (sequences) per step. */
  rows: number;
  /** Copying each row's cached K/V into contiguous rows (PagedKVCache.gather), ms per step. */
  kvGatherMs: number;
  /** Writing the new K/V rows into their pages (PagedKVCache.write), ms per step. */
  kvWriteMs: number;
}

/**
 * Prefill `prompts` (one sequence each, not profiled), then `steps` batched decode forwards of one row per
 * sequence through the sampler's forward (forwardRows over a paged KV cache), feeding each row's argmax;
 * the profile is the average step. Choosing tokens is left out (the whole sampling run's profile has
 * it). `model.kernels` must be `profiler.kernels`.
 */
export function profileDecodeStep(
  model: NanoModel,
  profiler: KernelProfiler,
  prompts: number[][],
  steps: number,
): DecodeStepProfile {
  const { L, Ckv, V } = model.dims;
  const cache = new PagedKVCache(L, Ckv, 16);
  const js = { gatherMs: 0, writeMs: 0 };
  const gather = cache.gather.bind(cache);
  const write = cache.write.bind(cache);
  cache.gather = (...args: Parameters<PagedKVCache['gather']>) => {
    const t = performance.now();
    gather(...args);
    js.gatherMs += performance.now() - t;
  };
  cache.write = (...args: Parameters<PagedKVCache['write']>) => {
    const t = performance.now();
    write(...args);
    js.writeMs += performance.now() - t;
  };
  const ws = new DecodeWorkspace(model);
  const seqs = prompts.map(() => cache.createSequence());
  const prefill = prompts.flatMap((p, b) =>
    p.map((token, t) => ({
      seq: seqs[b],
      token,
      wantLogits: t === p.length - 1,
    })),
  );
  let logits = forwardRows(model, cache, ws, prefill);
  const argmax = (b: number) => {
    let best = 0;
    for (let v = 1; v < V; v++) if (logits[b * V + v] > logits[b * V + best]) best = v;
    return best;
  };
  profiler.reset();
  js.gatherMs = js.writeMs = 0;
  let wallMs = 0;
  for (let s = 0; s < steps; s++) {
    const rows = seqs.map((seq, b) => ({ seq, token: argmax(b), wantLogits: true }));
    const t0 = performance.now();
    logits = forwardRows(model, cache, ws, rows);
    wallMs += performance.now() - t0;
  }
  for (const seq of seqs) cache.free(seq);
  const snapshot = profiler.snapshot(wallMs, steps);
  return { ...snapshot, rows: prompts.length, kvGatherMs: js.gatherMs / steps, kvWriteMs: js.writeMs / steps };
}
