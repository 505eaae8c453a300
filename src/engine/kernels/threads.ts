/**
 * Kernel threads: a pool of T−1 helper workers that instantiate the WASM kernel module over the same
 * shared memory, so one kernel call runs as up to T shares (share 0 on the calling thread, share i on
 * helper i, unless a thread that is free first takes it). Each output element is computed by the same
 * code in the same order whichever thread runs it; how a call is cut into shares (partition*,
 * AdaptiveSplit) and who runs each share never change a result bit. This module does not pick the
 * cuts' meaning (rows, columns, heads): wasm.ts does, per kernel.
 */
import { availableParallelism, loadavg } from 'node:os';
import { Worker } from 'node:worker_threads';

/** The kernels a helper can run (exports of the WASM module). */
export const HELPER_OPS = [
  'gemm',
  'gemmDecodeBT',
  'attentionForward',
  'attentionBackward',
  'treeAttentionForward',
  'treeAttentionBackward',
  'decodeAttention',
  'pagedAttention',
  'swigluForward',
  'swigluBackward',
  'rope',
  'rmsnormForward',
  'rmsnormBackwardGroups',
  'softmaxForward',
  'softmaxBackward',
  'samplingStats',
  'logitGrad',
  'adamw',
] as const;
export type HelperOp = (typeof HELPER_OPS)[number];
/** Arguments passed as f32 (read through a Float32Array view of the control words); all others are i32. */
const FLOAT_ARGS: Partial<Record<HelperOp, number[]>> = { rmsnormForward: [6], adamw: [5, 6, 7, 8, 9, 10, 11, 12] };

const HELPER_MAX_ARGS = 20;
/** Longest a share may run on a helper before the caller gives up (a dead worker, not a slow one). */
const HELPER_TIMEOUT_MS = 120_000;

/**
 * How long each side spins on a control word before sleeping in Atomics.wait. A futex wake on the
 * 2-core development VM took ~100 µs (a 2×80 µs elementwise call took 145 µs on two threads, 82 µs on
 * one), as long as a whole attention call; spinning hands a job over in well under a microsecond. A
 * helper spins only this long after its last job, so between steps it sleeps and leaves its core free.
 */
export const SPIN_MS = 2;

/**
 * The spin a pool of `threads` uses while other processes keep the machine's cores busy (`othersLoad`
 * runnable threads on average): SPIN_MS while every thread of the pool can have a core, else 0. With more
 * runnable threads than cores a spinning waiter holds a core that a thread with work is queued for (the
 * scheduler's slice is milliseconds), so every call would wait out the spins: on the 2-core VM at a load
 * of 5.5, two threads sampled at 24 tokens/s spinning and 34 without (one thread: 32).
 */
export function defaultSpinMs(threads: number, othersLoad = 0): number {
  return threads + othersLoad <= availableParallelism() + 0.25 ? SPIN_MS : 0;
}

/**
 * Other processes' runnable threads: the 1-minute load average less this process's own CPU use over
 * the last interval (cpu: µs of process.cpuUsage() over wallMs).
 */
function othersLoad(cpuMicros: number, wallMs: number): number {
  return Math.max(0, loadavg()[0] - cpuMicros / 1000 / Math.max(wallMs, 1));
}

/** How often an automatic pool looks at the machine's load again (ms). */
const LOAD_CHECK_MS = 1000;

/*
 * The pool's control block, one SharedArrayBuffer: i32 words [epoch, S, spin (µs), then per share s < threads
 * SHARE_WORDS words: state, op, argc, args...], then per share a float64: when it finished (ms since the
 * Unix epoch, performance.timeOrigin + now(), comparable across threads). A call
 * writes its S shares, sets their states to UNCLAIMED and bumps the epoch; every thread (the caller
 * and each woken helper) then claims unclaimed shares with compareExchange, runs them and marks them
 * DONE (or FAILED), each starting from its own share (thread i from share i), so a helper that has not
 * woken yet holds nothing up: whoever is free runs its share. Between calls every state is DONE or
 * FAILED, so a late helper of an earlier call claims nothing it should not. Pointers at or above 2^31 wrap to
 * negative i32 words and reach WASM's i32 parameters as the same bits.
 */
const UNCLAIMED = 0;
const RUNNING = 1;
const DONE = 2;
const FAILED = 3;
const HEADER_WORDS = 3;
const SHARE_WORDS = 3 + HELPER_MAX_ARGS;
const controlBytes = (threads: number) => {
  const words = HEADER_WORDS + threads * SHARE_WORDS;
  return { timesOffset: Math.ceil(words / 2) * 8, bytes: Math.ceil(words / 2) * 8 + threads * 8 };
};

const HELPER_WORKER = `const { workerData } = require('node:worker_threads');
const { module, memory, control, timesOffset, ops, floatArgs, index, threads } = workerData;
const [HEADER, WORDS, UNCLAIMED, RUNNING, DONE, FAILED] = [${HEADER_WORDS}, ${SHARE_WORDS}, ${UNCLAIMED}, ${RUNNING},
  ${DONE}, ${FAILED}];
const c = new Int32Array(control);
const f = new Float32Array(control);
const times = new Float64Array(control, timesOffset, threads);
const clock = () => performance.timeOrigin + performance.now();
let fns = [];
try {
  const ex = new WebAssembly.Instance(module, { env: { memory } }).exports;
  fns = ops.map((name) => ex[name]);
} catch {}
let seen = 0;
let last = performance.now();
for (;;) {
  // spin for a while after a call (calls come back to back while a step runs), then sleep
  while (Atomics.load(c, 0) === seen) {
    const spinMs = Atomics.load(c, 2) / 1000;
    if (performance.now() - last >= spinMs) {
      Atomics.wait(c, 0, seen, 1000);
      last = performance.now();
      if (Atomics.load(c, 0) === seen) last -= spinMs;
    }
  }
  seen = Atomics.load(c, 0);
  const S = Atomics.load(c, 1);
  for (let k = 0; k < S; k++) {
    const s = (index + k) % S;
    const at = HEADER + s * WORDS;
    if (Atomics.compareExchange(c, at, UNCLAIMED, RUNNING) !== UNCLAIMED) continue;
    let state = DONE;
    try {
      const args = [];
      const floats = floatArgs[c[at + 1]];
      for (let i = 0; i < c[at + 2]; i++) args.push(floats.includes(i) ? f[at + 3 + i] : c[at + 3 + i]);
      fns[c[at + 1]].apply(null, args);
    } catch {
      state = FAILED;
    }
    times[s] = clock();
    Atomics.store(c, at, state);
    Atomics.notify(c, at);
  }
  last = performance.now();
}
`;

/** One thread's part of a call: `op(...args)`. */
export interface Share {
  op: HelperOp;
  args: number[];
}

/**
 * How long each share of a call took, from the post until it was done: index 0 the caller's, i ≥ 1
 * helper i−1's; −1 for every share when some share ran on another thread than its own (a helper late
 * to wake had its share taken), so such calls teach AdaptiveSplit nothing.
 */
export type ShareTimes = number[];

const clock = () => performance.timeOrigin + performance.now();
const cpuMicros = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

/**
 * T−1 helpers over one control block. `run(shares, here)` posts the shares (at most T), wakes S−1
 * helpers, and claims shares itself, running those it wins through `here` on the calling thread (its
 * own share 0 first, then any share no helper has started); then it waits for the shares helpers run:
 * spinning (defaultSpinMs of the machine's load, or a fixed spin), then sleeping in Atomics.wait, with
 * a time limit so a dead helper is an error, not a hang. A share that throws on the caller is rethrown
 * after every share is done or failed.
 */
export class KernelPool {
  private readonly workers: Worker[] = [];
  private readonly control: Int32Array;
  private readonly floats: Float32Array;
  private readonly times: Float64Array;
  /** Shares posted for each helper (tests check that a call was really split for every thread). */
  readonly jobs: number[];
  private spinMs: number;
  /** When (and at which process CPU time) the load was last looked at; undefined: a fixed spin. */
  private loadCheck: { wallMs: number; cpuMicros: number } | undefined;

  /** `spinMs`: a fixed spin; by default defaultSpinMs of the machine's load, looked at again every second. */
  constructor(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    readonly threads: number,
    spinMs?: number,
  ) {
    const { timesOffset, bytes } = controlBytes(threads);
    const buffer = new SharedArrayBuffer(bytes);
    this.control = new Int32Array(buffer);
    this.spinMs = spinMs ?? defaultSpinMs(threads, loadavg()[0]);
    if (spinMs === undefined) this.loadCheck = { wallMs: performance.now(), cpuMicros: cpuMicros() };
    this.control[2] = Math.round(this.spinMs * 1000);
    this.floats = new Float32Array(buffer);
    this.times = new Float64Array(buffer, timesOffset, threads);
    for (let s = 0; s < threads; s++) this.control[HEADER_WORDS + s * SHARE_WORDS] = DONE;
    const floatArgs = HELPER_OPS.map((op) => FLOAT_ARGS[op] ?? []);
    for (let index = 1; index < threads; index++) {
      const ops = [...HELPER_OPS];
      const workerData = { module, memory, control: buffer, timesOffset, ops, floatArgs, index, threads };
      const worker = new Worker(HELPER_WORKER, { eval: true, workerData });
      worker.unref();
      this.workers.push(worker);
    }
    this.jobs = new Array(threads - 1).fill(0);
  }

  /** Run `shares` (at most `threads`); returns each share's time (see ShareTimes). */
  run(shares: readonly Share[], here: (share: Share) => void): ShareTimes {
    const S = shares.length;
    if (S > this.threads) throw new Error(`wasm kernels: ${S} shares for ${this.threads} threads`);
    this.adjustSpin();
    const c = this.control;
    shares.forEach((share, s) => this.write(s, share));
    Atomics.store(c, 1, S);
    for (let s = 0; s < S; s++) Atomics.store(c, HEADER_WORDS + s * SHARE_WORDS, UNCLAIMED);
    const t0 = clock();
    Atomics.add(c, 0, 1);
    Atomics.notify(c, 0, S - 1);
    for (let i = 0; i < S - 1; i++) this.jobs[i]++;
    const ranHere: boolean[] = new Array(S).fill(false);
    let error: Error | undefined;
    for (let s = 0; s < S; s++) {
      const at = HEADER_WORDS + s * SHARE_WORDS;
      if (Atomics.compareExchange(c, at, UNCLAIMED, RUNNING) !== UNCLAIMED) continue;
      ranHere[s] = true;
      let state = DONE;
      try {
        here(shares[s]);
      } catch (e) {
        error ??= e instanceof Error ? e : new Error(String(e));
        state = FAILED;
      }
      this.times[s] = clock();
      Atomics.store(c, at, state);
    }
    const failed = this.waitAll(S);
    if (error !== undefined) throw error;
    if (failed) throw new Error('wasm kernels: a helper thread failed');
    const own = ranHere.every((here, s) => here === (s === 0));
    return ranHere.map((_, s) => (own ? this.times[s] - t0 : -1));
  }

  /** At most every LOAD_CHECK_MS, an automatic spin follows the load other processes put on the machine. */
  private adjustSpin(): void {
    const check = this.loadCheck;
    if (!check || performance.now() - check.wallMs < LOAD_CHECK_MS) return;
    const [wallMs, cpu] = [performance.now(), cpuMicros()];
    this.spinMs = defaultSpinMs(this.threads, othersLoad(cpu - check.cpuMicros, wallMs - check.wallMs));
    Atomics.store(this.control, 2, Math.round(this.spinMs * 1000));
    this.loadCheck = { wallMs, cpuMicros: cpu };
  }

  /** Stop the helper threads, between calls (later calls still complete: the caller runs every share). */
  async terminate(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  /** Share s's op and arguments into its control words (f32 at the positions FLOAT_ARGS names). */
  private write(s: number, share: Share): void {
    const { op, args } = share;
    if (args.length > HELPER_MAX_ARGS) {
      throw new Error(`wasm kernels: ${op} has ${args.length} arguments, a helper takes ${HELPER_MAX_ARGS}`);
    }
    const at = HEADER_WORDS + s * SHARE_WORDS;
    this.control[at + 1] = HELPER_OPS.indexOf(op);
    this.control[at + 2] = args.length;
    const floats = FLOAT_ARGS[op] ?? [];
    for (let i = 0; i < args.length; i++) {
      if (floats.includes(i)) this.floats[at + 3 + i] = args[i];
      else this.control[at + 3 + i] = args[i];
    }
  }

  /** Wait until no share of the call is RUNNING (spin, then sleep); whether any failed. */
  private waitAll(S: number): boolean {
    const c = this.control;
    const spinUntil = performance.now() + this.spinMs;
    let failed = false;
    for (let s = 0; s < S; s++) {
      const at = HEADER_WORDS + s * SHARE_WORDS;
      const deadline = Date.now() + HELPER_TIMEOUT_MS;
      while (Atomics.load(c, at) === RUNNING) {
        if (performance.now() < spinUntil) continue;
        if (Atomics.wait(c, at, RUNNING, 1000) === 'timed-out' && Date.now() > deadline) {
          throw new Error('wasm kernels: a helper thread did not answer');
        }
      }
      failed ||= Atomics.load(c, at) === FAILED;
    }
    return failed;
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
