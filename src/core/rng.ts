/**
 * Seeded pseudo-random generator (xoshiro128**, 32-bit state words) used for every random choice in
 * Arbor, so a run is reproducible from its config. State can be saved and restored for resume.
 * `fork(label)` derives an independent child stream deterministically (e.g. one per prompt).
 * Not cryptographic.
 */

/** Serialisable generator state: four unsigned 32-bit words. */
export type RngState = [number, number, number, number];

/** splitmix32 step, used to expand seeds into full state. */
function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** 32-bit FNV-1a hash of a string, for deriving streams from labels. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export class Rng {
  private s: Uint32Array;

  constructor(seed: number | RngState = 0) {
    this.s = new Uint32Array(4);
    if (Array.isArray(seed)) {
      this.s.set(seed);
    } else {
      const mix = splitmix32(Math.floor(seed) ^ 0x5bd1e995);
      for (let i = 0; i < 4; i++) this.s[i] = mix();
    }
    if ((this.s[0] | this.s[1] | this.s[2] | this.s[3]) === 0) this.s[0] = 1;
  }

  /** Next raw unsigned 32-bit integer. */
  nextU32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform float in [0, 1) with 32 bits of randomness. */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    if (!(n > 0)) throw new RangeError(`Rng.int: n must be > 0, got ${n}`);
    return Math.floor(this.next() * n);
  }

  /** Uniform integer in [lo, hi] inclusive. */
  intRange(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** Standard normal sample (Box–Muller). */
  normal(): number {
    let u = this.next();
    while (u <= 1e-12) u = this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** In-place Fisher–Yates shuffle; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = items[i];
      items[i] = items[j];
      items[j] = tmp;
    }
    return items;
  }

  /** A deterministic, independent child stream named by `label` (does not advance this stream). */
  fork(label: string | number): Rng {
    const h = hashString(String(label));
    const mix = splitmix32((this.s[0] ^ Math.imul(this.s[3], 31) ^ h) >>> 0);
    const st: RngState = [mix() ^ this.s[1], mix() ^ this.s[2], mix(), mix() ^ h];
    return new Rng(st.map((x) => x >>> 0) as RngState);
  }

  /** Current state, for checkpoints. */
  getState(): RngState {
    return [this.s[0], this.s[1], this.s[2], this.s[3]];
  }

  setState(state: RngState): void {
    this.s.set(state);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** Gamma(shape, 1) by Marsaglia–Tsang (shape < 1 through Gamma(shape + 1)·U^(1/shape)). */
export function sampleGamma(rng: Rng, shape: number): number {
  if (!(shape > 0)) throw new RangeError(`gamma shape must be > 0, got ${shape}`);
  if (shape < 1) return sampleGamma(rng, shape + 1) * Math.max(rng.next(), 1e-300) ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    const x = rng.normal();
    const v = (1 + c * x) ** 3;
    if (v <= 0) continue;
    const u = rng.next();
    if (Math.log(Math.max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
  }
}

/** Beta(a, b) as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b). */
export function sampleBeta(rng: Rng, a: number, b: number): number {
  const x = sampleGamma(rng, a);
  const y = sampleGamma(rng, b);
  return x / (x + y);
}
