/**
 * Kernel threads: a pool of T−1 helper workers that instantiate the WASM kernel module over the same
 * shared memory, so one kernel call runs as T shares (share 0 on the calling thread). Each output
 * element is computed by the same code in the same order whichever thread runs it; how a call is cut
 * into shares (partition*, AdaptiveSplit) never changes a result bit. This module does not pick the
 * cuts' meaning (rows, columns, heads): wasm.ts does, per kernel. Helpers run one job at a time.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** The kernels a helper can run (exports of the WASM module). */
export const HELPER_OPS = [
  'gemm', 'gemmSmallBT', 'attentionForward', 'attentionBackward', 'decodeAttention', 'swigluForward', 'swigluBackward',
  'rope', 'rmsnormForward', 'rmsnormBackwardGroups', 'softmaxForward', 'softmaxBackward', 'logitGrad', 'adamw',
] as const;
export type HelperOp = (typeof HELPER_OPS)[number];
/** Arguments passed as f32 (read through a Float32Array view of the control words); all others are i32. */
const FLOAT_ARGS: Partial<Record<HelperOp, number[]>> = { rmsnormForward: [6], adamw: [5, 6, 7, 8, 9, 10, 11, 12] };

/** Byte offset in a helper's control buffer of its last job's duration (a float64, ms, its own clock). */
const DONE_OFFSET = 128;
const HELPER_MAX_ARGS = 20;
/** Longest a job may take on a helper before the caller gives up (a dead worker, not a slow one). */
const HELPER_TIMEOUT_MS = 120_000;

/**
 * How long each side spins on a control word before sleeping in Atomics.wait. A futex wake on the
 * 2-core development VM took ~100 µs (a 2×80 µs elementwise call took 145 µs on two threads, 82 µs on
 * one), as long as a whole attention call; spinning hands a job over in well under a microsecond. A
 * helper spins only this long after its last job, so between steps it sleeps and leaves its core free.
 */
export const SPIN_MS = 2;

/**
 * The spin a pool of `threads` uses by default: SPIN_MS while every thread can have a core, else 0.
 * With more threads than cores a spinning waiter holds a core that a thread with work is queued for
 * (the scheduler's slice is milliseconds), so every call would wait out the spins; sleeping at once
 * costs only the futex wake.
 */
export function defaultSpinMs(threads: number): number {
  return threads <= availableParallelism() ? SPIN_MS : 0;
}

/*
 * A helper's control block is an Int32Array in its own SharedArrayBuffer: [state, op, argc, args...]
 * with op an index into HELPER_OPS; state 1 = job posted, 0 = done, 3 = the job failed (the caller
 * resets it and throws). Pointers at or above 2^31 wrap to negative i32 words and reach WASM's i32
 * parameters as the same bits.
 */
const HELPER_WORKER = `const DONE_OFFSET = ${DONE_OFFSET};
const { workerData } = require('node:worker_threads');
const { module, memory, control, ops, floatArgs, spinMs: SPIN_MS } = workerData;
const c = new Int32Array(control);
const f = new Float32Array(control);
const done = new Float64Array(control, DONE_OFFSET, 1);
let fns = [];
try {
  const ex = new WebAssembly.Instance(module, { env: { memory } }).exports;
  fns = ops.map((name) => ex[name]);
} catch {}
let last = performance.now();
for (;;) {
  // spin for a while after a job (calls come back to back while a step runs), then sleep
  while (Atomics.load(c, 0) !== 1) {
    if (performance.now() - last >= SPIN_MS) {
      Atomics.wait(c, 0, 0, 1000);
      last = performance.now();
      if (Atomics.load(c, 0) !== 1) last -= SPIN_MS;
    }
  }
  let state = 0;
  const started = performance.now();
  try {
    const args = [];
    const floats = floatArgs[c[1]];
    for (let i = 0; i < c[2]; i++) args.push(floats.includes(i) ? f[3 + i] : c[3 + i]);
    fns[c[1]].apply(null, args);
  } catch {
    state = 3;
  }
  last = performance.now();
  done[0] = last - started;
  Atomics.store(c, 0, state);
  Atomics.notify(c, 0);
}
`;

/** One helper worker and its control block. */
class KernelHelper {
  readonly control = new Int32Array(new SharedArrayBuffer(DONE_OFFSET + 8));
  private readonly done = new Float64Array(this.control.buffer, DONE_OFFSET, 1);
  private readonly floats = new Float32Array(this.control.buffer);
  private readonly worker: Worker;

  constructor(module: WebAssembly.Module, memory: WebAssembly.Memory, spinMs: number) {
    const floatArgs = HELPER_OPS.map((op) => FLOAT_ARGS[op] ?? []);
    const workerData = { module, memory, control: this.control.buffer, ops: [...HELPER_OPS], floatArgs, spinMs };
    this.worker = new Worker(HELPER_WORKER, { eval: true, workerData });
    this.worker.unref();
  }

  /** Start `op(...args)` (i32 arguments, f32 at the positions FLOAT_ARGS names). */
  post(op: HelperOp, args: readonly number[]): void {
    if (args.length > HELPER_MAX_ARGS) {
      throw new Error(`wasm kernels: ${op} has ${args.length} arguments, a helper takes ${HELPER_MAX_ARGS}`);
    }
    this.control[1] = HELPER_OPS.indexOf(op);
    this.control[2] = args.length;
    const floats = FLOAT_ARGS[op] ?? [];
    for (let i = 0; i < args.length; i++) {
      if (floats.includes(i)) this.floats[i + 3] = args[i];
      else this.control[i + 3] = args[i];
    }
    Atomics.store(this.control, 0, 1);
    Atomics.notify(this.control, 0);
  }

  busy(): boolean {
    return Atomics.load(this.control, 0) === 1;
  }

  /** How long the last job ran (the helper's own clock: the threads' time origins differ). */
  lastJobMs(): number {
    return this.done[0];
  }

  /** Sleep until the job is done (the spin phase is the pool's). */
  sleepUntilDone(): void {
    const deadline = Date.now() + HELPER_TIMEOUT_MS;
    while (this.busy()) {
      if (Atomics.wait(this.control, 0, 1, 1000) === 'timed-out' && Date.now() > deadline) {
        throw new Error('wasm kernels: a helper thread did not answer');
      }
    }
  }

  /** Whether the last job failed; resets the failure state. */
  takeFailure(): boolean {
    if (Atomics.load(this.control, 0) !== 3) return false;
    Atomics.store(this.control, 0, 0);
    return true;
  }
}

/** One thread's part of a call: `op(...args)`. */
export interface Share {
  op: HelperOp;
  args: number[];
}

/** How long each share of a call took: index 0 the caller, i ≥ 1 helper i−1 (ms). */
export type ShareTimes = number[];

/**
 * T−1 helpers. `run(shares, here)` posts shares 1.. to helpers 0.., runs share 0 through `here` on
 * the calling thread, then waits for every helper (always, even when share 0 throws, so no helper is
 * left busy). The wait spins `spinMs` over all helpers, then sleeps in Atomics.wait (no event loop
 * round trip), with a time limit so a dead helper is an error, not a hang.
 */
export class KernelPool {
  private readonly helpers: KernelHelper[] = [];
  /** Jobs each helper has been given (tests check that a call really ran on every thread). */
  readonly jobs: number[];

  constructor(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    readonly threads: number,
    private readonly spinMs = defaultSpinMs(threads),
  ) {
    for (let i = 1; i < threads; i++) this.helpers.push(new KernelHelper(module, memory, spinMs));
    this.jobs = new Array(threads - 1).fill(0);
  }

  /**
   * Run `shares` (at most `threads`); returns each share's time. A helper's time is from the post
   * until the caller saw it done while spinning (its start latency included), or its own run time
   * when it was done before the caller finished share 0 or was only seen done after a sleep.
   */
  run(shares: readonly Share[], here: (share: Share) => void): ShareTimes {
    const n = shares.length - 1;
    if (n > this.helpers.length) throw new Error(`wasm kernels: ${shares.length} shares for ${this.threads} threads`);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      this.helpers[i].post(shares[i + 1].op, shares[i + 1].args);
      this.jobs[i]++;
    }
    const times: ShareTimes = new Array(n + 1).fill(-1);
    try {
      here(shares[0]);
    } finally {
      const t1 = performance.now();
      times[0] = t1 - t0;
      this.waitAll(n, t0, t1, times);
    }
    return times;
  }

  private waitAll(n: number, t0: number, t1: number, times: ShareTimes): void {
    let pending = 0;
    for (let i = 0; i < n; i++) {
      if (this.helpers[i].busy()) pending++;
      else times[i + 1] = this.helpers[i].lastJobMs();
    }
    const spinUntil = t1 + this.spinMs;
    while (pending > 0) {
      const now = performance.now();
      for (let i = 0; i < n; i++) {
        if (times[i + 1] < 0 && !this.helpers[i].busy()) {
          times[i + 1] = now - t0;
          pending--;
        }
      }
      if (now >= spinUntil) break;
    }
    let failed = false;
    for (let i = 0; i < n; i++) {
      if (times[i + 1] < 0) {
        this.helpers[i].sleepUntilDone();
        times[i + 1] = this.helpers[i].lastJobMs();
      }
      failed = this.helpers[i].takeFailure() || failed;
    }
    if (failed) throw new Error('wasm kernels: a helper thread failed');
  }
}

/**
 * Each thread's share of a GEMM, following the threads' measured throughput (work units per ms).
 * Equal shares left the calling thread waiting ~190 µs per large GEMM on the 2-core VM: the helper
 * ran its half ~12% slower and woke with a delay. Each update moves a share a fifth of the way to
 * the measured ideal and keeps it within ±30% of equal (1/S); which thread computes a row or column
 * does not change its value, so results stay bit-identical whatever the shares.
 */
export class AdaptiveSplit {
  /** Relative speed of each thread (1 = average). */
  private readonly weight: number[];

  constructor(readonly threads: number) {
    this.weight = new Array(threads).fill(1);
  }

  /** The shares of the first S threads (they sum to 1). */
  shares(S: number): number[] {
    const w = this.weight.slice(0, S);
    const total = w.reduce((a, b) => a + b, 0);
    return w.map((x) => x / total);
  }

  /** One split call over S = units.length threads: thread i did units[i] units of work in ms[i]. */
  observe(units: readonly number[], ms: readonly number[]): void {
    const S = units.length;
    if (S < 2 || !ms.every((t) => t > 0.05)) return;
    const speed = units.map((u, i) => u / ms[i]);
    const total = speed.reduce((a, b) => a + b, 0);
    const next = this.shares(S).map((s, i) => Math.min(1.3 / S, Math.max(0.7 / S, 0.8 * s + 0.2 * (speed[i] / total))));
    const sum = next.reduce((a, b) => a + b, 0);
    next.forEach((s, i) => (this.weight[i] = (s / sum) * S));
  }
}

/**
 * Cut `units` work units into S = shares.length contiguous ranges in proportion to `shares`; returns
 * S + 1 boundaries from 0 to units, each range non-empty (requires units ≥ S).
 */
export function partitionByShares(units: number, shares: readonly number[]): number[] {
  const S = shares.length;
  const bounds = [0];
  let cumulative = 0;
  for (let i = 1; i < S; i++) {
    cumulative += shares[i - 1];
    bounds.push(Math.min(units - (S - i), Math.max(bounds[i - 1] + 1, Math.round(units * cumulative))));
  }
  bounds.push(units);
  return bounds;
}

/**
 * Cut items with costs `cost(i)` (i < count) into S contiguous non-empty ranges of about equal total
 * cost: boundary s is the first item where the cost so far reaches s/S of the total.
 */
export function partitionByCost(count: number, S: number, cost: (i: number) => number): number[] {
  let total = 0;
  for (let i = 0; i < count; i++) total += cost(i);
  const bounds = [0];
  let acc = 0;
  let i = 0;
  for (let s = 1; s < S; s++) {
    while (i < count - (S - s) && (i < bounds[s - 1] + 1 || acc * S < total * s)) acc += cost(i++);
    bounds.push(i);
  }
  bounds.push(count);
  return bounds;
}
