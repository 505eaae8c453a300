// WASM SIMD GEMM (AssemblyScript). C[M,N] (+)= A·B with A, B given by strides so one routine serves
// the three layouts: A(i,k) = a[i*sai + k*sak], B(k,j) = b[k*sbk + j*sbj]. B is packed into panels of
// NR=8 columns and A into panels of MR=4 rows (k-major), per K-block of KC; a 4×8 register tile of
// f32x4 accumulators does the work (`madd`: a fused multiply-add in the relaxed-SIMD build, mul + add
// in the plain one). The micro-kernel walks the packs with two bumped pointers and constant load
// offsets, so V8's loop body is 6 loads + 8 FMAs + 2 adds and a compare (indexing by k recomputed the
// addresses, with a multiply, every step). Bigger tiles do not pay under V8: it issues every load of a
// step before the FMAs, so 5×8 or 6×8 run out of the 15 usable xmm registers and spill accumulators.
// Packing uses 4×4 SIMD transposes where the source is contiguous along k (A·Bᵀ's B; A·B's and A·Bᵀ's
// A). Ragged edges are zero-padded in the packs and written through a bounds-checked store. Each
// output element is the same sum in the same k order whatever tile or thread computes it.
// Columns are taken NC at a time (the packed B of one K block, kc×NC floats, stays in L2 while every
// row panel of A passes over it): packing the whole of a vocabulary-wide B (49152 columns: 50 MB per
// K block) and streaming it from memory once per 4-row panel ran at a quarter of the speed.
// gemmDecodeBT (decode steps: a few rows of A against a weight matrix) packs nothing: see its doc.

import { madd } from './madd';

export const MR: i32 = 4;
export const NR: i32 = 8;
export const KC: i32 = 256;
/** Columns per packed B block (a multiple of NR): kc·NC·4 = 512 KB. */
export const NC: i32 = 512;

/**
 * Zero n floats at p with vector stores. memory.fill is a call out of the generated code in V8, which
 * cost as much as the rest of a causal softmax row did (half of attentionForward's time at T = 96).
 */
// @ts-ignore: decorator
@inline
export function zeroFloats(p: usize, n: i32): void {
  let i = 0;
  const z = f32x4.splat(0);
  for (; i + 4 <= n; i += 4) v128.store(p + (<usize>i << 2), z);
  for (; i < n; i++) store<f32>(p + (<usize>i << 2), 0);
}

/** Pack B(k0..k0+kc, 0..N) into ceil(N/NR) panels of [kc][NR]. */
function packB(b: usize, sbk: i32, sbj: i32, k0: i32, kc: i32, N: i32, out: usize): void {
  const panels = (N + NR - 1) / NR;
  for (let p = 0; p < panels; p++) {
    const j0 = p * NR;
    const w = min(NR, N - j0);
    const dst = out + <usize>(p * kc * NR) * 4;
    if (sbj == 1 && w == NR) {
      for (let k = 0; k < kc; k++) {
        const src = b + <usize>((k0 + k) * sbk + j0) * 4;
        v128.store(dst + <usize>(k * NR) * 4, v128.load(src));
        v128.store(dst + <usize>(k * NR) * 4, v128.load(src, 16), 16);
      }
    } else if (sbk == 1 && w == NR) {
      // B(k, j) = b[j*sbj + k]: the 8 columns are contiguous rows in memory; 4×4 transposes
      const r = b + <usize>(j0 * sbj + k0) * 4;
      const rs = <usize>sbj * 4;
      let k = 0;
      for (; k + 4 <= kc; k += 4) {
        const s = r + (<usize>k << 2);
        const d = dst + <usize>(k * NR) * 4;
        transposeStore4(v128.load(s), v128.load(s + rs), v128.load(s + rs * 2), v128.load(s + rs * 3), d, NR * 4);
        const s4 = s + rs * 4;
        const r4 = v128.load(s4 + rs * 3);
        transposeStore4(v128.load(s4), v128.load(s4 + rs), v128.load(s4 + rs * 2), r4, d + 16, NR * 4);
      }
      for (; k < kc; k++) {
        const row = dst + <usize>(k * NR) * 4;
        for (let jj = 0; jj < NR; jj++) {
          store<f32>(row + <usize>jj * 4, load<f32>(r + <usize>jj * rs + (<usize>k << 2)));
        }
      }
    } else {
      for (let k = 0; k < kc; k++) {
        const row = dst + <usize>(k * NR) * 4;
        for (let jj = 0; jj < NR; jj++) {
          store<f32>(row + <usize>jj * 4, jj < w ? load<f32>(b + <usize>((k0 + k) * sbk + (j0 + jj) * sbj) * 4) : 0);
        }
      }
    }
  }
}

/** Stores the transpose of the 4×4 block with rows r0..r3: column t goes to d + t*stride (16 bytes). */
// @ts-ignore: decorator
@inline
function transposeStore4(r0: v128, r1: v128, r2: v128, r3: v128, d: usize, stride: i32): void {
  const t0 = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5);
  const t1 = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7);
  const t2 = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
  const t3 = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  const s = <usize>stride;
  v128.store(d, v128.shuffle<f32>(t0, t2, 0, 1, 4, 5));
  v128.store(d + s, v128.shuffle<f32>(t0, t2, 2, 3, 6, 7));
  v128.store(d + s * 2, v128.shuffle<f32>(t1, t3, 0, 1, 4, 5));
  v128.store(d + s * 3, v128.shuffle<f32>(t1, t3, 2, 3, 6, 7));
}

/** Pack A(i0..i0+MR, k0..k0+kc) into [kc][MR]. */
function packA(a: usize, sai: i32, sak: i32, i0: i32, k0: i32, kc: i32, M: i32, out: usize): void {
  const h = min(MR, M - i0);
  if (sai == 1 && h == MR) {
    // A(i, k) = a[i + k*sak]: the MR rows of one k are contiguous
    for (let k = 0; k < kc; k++) {
      const src = a + <usize>(i0 + (k0 + k) * sak) * 4;
      const dst = out + <usize>(k * MR) * 4;
      v128.store(dst, v128.load(src));
    }
    return;
  }
  if (sak == 1 && h == MR) {
    // A(i, k) = a[i*sai + k]: the MR rows are contiguous along k; 4×4 transposes
    const r = a + <usize>(i0 * sai + k0) * 4;
    const rs = <usize>sai * 4;
    let k = 0;
    for (; k + 4 <= kc; k += 4) {
      const s = r + (<usize>k << 2);
      const d = out + <usize>(k * MR) * 4;
      transposeStore4(v128.load(s), v128.load(s + rs), v128.load(s + rs * 2), v128.load(s + rs * 3), d, MR * 4);
    }
    for (; k < kc; k++) {
      const d = out + <usize>(k * MR) * 4;
      for (let ii = 0; ii < MR; ii++) store<f32>(d + <usize>ii * 4, load<f32>(r + <usize>ii * rs + (<usize>k << 2)));
    }
    return;
  }
  for (let k = 0; k < kc; k++) {
    for (let ii = 0; ii < MR; ii++) {
      const x = ii < h ? load<f32>(a + <usize>((i0 + ii) * sai + (k0 + k) * sak) * 4) : 0;
      store<f32>(out + <usize>(k * MR + ii) * 4, x);
    }
  }
}

/** packABuf holds min(K, KC)·MR floats of packed A plus MR·NR floats for the ragged-edge tile. */
export function gemm(
  M: i32, N: i32, K: i32, a: usize, sai: i32, sak: i32, b: usize, sbk: i32, sbj: i32, c: usize, ldc: i32,
  accumulate: i32, packBuf: usize, packABuf: usize,
): void {
  gemmCore(M, N, K, a, sai, sak, b, sbk, sbj, c, ldc, accumulate, packBuf, packABuf, FULL);
}

/** Every output entry, every k. */
export const FULL: i32 = 0;
/**
 * Only outputs with j ≤ i are needed (causal scores): tiles wholly above the diagonal are skipped and
 * left unwritten.
 */
export const CAUSAL_N: i32 = 1;
/** A(i, k) is zero for k > i (A lower-triangular: P·V, dS·K): those terms are skipped. */
export const CAUSAL_K_LOWER: i32 = 2;
/** A(i, k) is zero for k < i (A upper-triangular: Pᵀ·dO, dSᵀ·Q): those terms are skipped. */
export const CAUSAL_K_UPPER: i32 = 3;

/**
 * C (+)= A·B with C(i, j) at c[i*ldc + j]. `mode` skips work that a triangular structure makes
 * zero or unneeded (see FULL, CAUSAL_*). Skipped k terms are exact zeros (0·x adds nothing), so the
 * computed entries equal the FULL ones bit for bit.
 */
export function gemmCore(
  M: i32, N: i32, K: i32, a: usize, sai: i32, sak: i32, b: usize, sbk: i32, sbj: i32, c: usize, ldc: i32,
  accumulate: i32, packBuf: usize, packABuf: usize, mode: i32,
): void {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) for (let i = 0; i < M; i++) zeroFloats(c + <usize>(i * ldc) * 4, N);
    return;
  }
  for (let n0 = 0; n0 < N; n0 += NC) {
    const nb = min(NC, N - n0);
    const bn = b + (<usize>n0 * <usize>sbj << 2);
    const cn = c + (<usize>n0 << 2);
    const panels = (nb + NR - 1) / NR;
    for (let k0 = 0; k0 < K; k0 += KC) {
      const kc = min(KC, K - k0);
      const acc = accumulate != 0 || k0 > 0;
      packB(bn, sbk, sbj, k0, kc, nb, packBuf);
      for (let i0 = 0; i0 < M; i0 += MR) {
        const h = min(MR, M - i0);
        // the k range [ks, ke) of this block that can be nonzero for rows i0..i0+h-1
        let ks = 0;
        let ke = kc;
        if (mode == CAUSAL_K_LOWER) ke = min(kc, i0 + h - k0);
        else if (mode == CAUSAL_K_UPPER) ks = max(0, i0 - k0);
        // causal scores: this block's panels up to the one holding column i0 + h − 1 (none before n0)
        const last = i0 + h - 1 - n0;
        const pEnd = mode != CAUSAL_N ? panels : last < 0 ? 0 : min(panels, last / NR + 1);
        if (pEnd == 0) continue;
        if (ke <= ks) {
          if (!acc) for (let i = 0; i < h; i++) zeroFloats(cn + <usize>((i0 + i) * ldc) * 4, nb);
          continue;
        }
        packA(a, sai, sak, i0, k0 + ks, ke - ks, M, packABuf);
        for (let p = 0; p < pEnd; p++) {
          const j0 = p * NR;
          const w = min(NR, nb - j0);
          const pb = packBuf + <usize>(p * kc * NR + ks * NR) * 4;
          kernel4x8(packABuf, pb, ke - ks, cn + <usize>(i0 * ldc + j0) * 4, ldc, h, w, acc);
        }
      }
    }
  }
}

// @ts-ignore: decorator
@inline
function kernel4x8(pa: usize, pb: usize, kc: i32, c: usize, ldc: i32, h: i32, w: i32, acc: bool): void {
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  let ap = pa;
  let bp = pb;
  const bend = pb + (<usize>kc << 5);
  while (bp < bend) {
    const b0 = v128.load(bp);
    const b1 = v128.load(bp, 16);
    let av = v128.load32_splat(ap);
    c00 = madd(av, b0, c00);
    c01 = madd(av, b1, c01);
    av = v128.load32_splat(ap, 4);
    c10 = madd(av, b0, c10);
    c11 = madd(av, b1, c11);
    av = v128.load32_splat(ap, 8);
    c20 = madd(av, b0, c20);
    c21 = madd(av, b1, c21);
    av = v128.load32_splat(ap, 12);
    c30 = madd(av, b0, c30);
    c31 = madd(av, b1, c31);
    ap += MR * 4;
    bp += NR * 4;
  }
  const stride = <usize>ldc * 4;
  if (h == MR && w == NR) {
    storeRow(c, c00, c01, acc);
    storeRow(c + stride, c10, c11, acc);
    storeRow(c + stride * 2, c20, c21, acc);
    storeRow(c + stride * 3, c30, c31, acc);
    return;
  }
  // ragged tile: spill to a scratch tile then copy the valid part. The tile sits right after the
  // packed A panel in the caller's packA buffer (which has MR·NR floats of room for it), not in static
  // memory: several threads run this module over one shared memory (kernels/threads.ts KernelPool).
  const tile = pa + <usize>(kc * MR) * 4;
  v128.store(tile, c00); v128.store(tile, c01, 16);
  v128.store(tile, c10, 32); v128.store(tile, c11, 48);
  v128.store(tile, c20, 64); v128.store(tile, c21, 80);
  v128.store(tile, c30, 96); v128.store(tile, c31, 112);
  for (let i = 0; i < h; i++) {
    for (let j = 0; j < w; j++) {
      const dst = c + <usize>i * stride + <usize>j * 4;
      const v = load<f32>(tile + <usize>(i * NR + j) * 4);
      store<f32>(dst, acc ? load<f32>(dst) + v : v);
    }
  }
}

// @ts-ignore: decorator
@inline
function storeRow(p: usize, v0: v128, v1: v128, acc: bool): void {
  if (acc) {
    v128.store(p, f32x4.add(v128.load(p), v0));
    v128.store(p, f32x4.add(v128.load(p, 16), v1), 16);
  } else {
    v128.store(p, v0);
    v128.store(p, v1, 16);
  }
}

/**
 * The four lane sums of a, b, c, d as one vector [Σa, Σb, Σc, Σd], each summed as (l0 + l1) + (l2 + l3)
 * (the order every dot product of gemmDecodeBT uses, whichever tile computes it).
 */
// @ts-ignore: decorator
@inline
export function laneSums4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(v128.shuffle<f32>(a, b, 0, 4, 2, 6), v128.shuffle<f32>(a, b, 1, 5, 3, 7));
  const cd = f32x4.add(v128.shuffle<f32>(c, d, 0, 4, 2, 6), v128.shuffle<f32>(c, d, 1, 5, 3, 7));
  return f32x4.add(v128.shuffle<f32>(ab, cd, 0, 1, 4, 5), v128.shuffle<f32>(ab, cd, 2, 3, 6, 7));
}

/** One output of gemmDecodeBT: the vector part `v`, plus the k ≥ k4 terms of rows ar·br, into p. */
// @ts-ignore: decorator
@inline
function decodePut(p: usize, v: f32, ar: usize, br: usize, k4: i32, K: i32, accumulate: i32): void {
  for (let k = k4; k < K; k++) v += load<f32>(ar + (<usize>k << 2)) * load<f32>(br + (<usize>k << 2));
  store<f32>(p, accumulate ? load<f32>(p) + v : v);
}

/**
 * An R×W tile of gemmDecodeBT (R ∈ {1, 2, 4} rows of A from a0, W ∈ {1, 2} rows of B from b0; rows rb
 * bytes apart): R·W f32x4 accumulators over k < k4 (madd in k order), then laneSums4 and decodePut.
 * R and W are constants at every call, so the unused accumulators and branches fold away.
 */
// @ts-ignore: decorator
@inline
function decodeTile(
  R: i32, W: i32, a0: usize, b0: usize, rb: usize, k4: i32, K: i32, c: usize, ldc: i32, accumulate: i32,
): void {
  const a1 = a0 + rb, a2 = a1 + rb, a3 = a2 + rb;
  const b1 = b0 + rb;
  const z = f32x4.splat(0);
  let c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z;
  const end = <usize>k4 << 2;
  for (let o: usize = 0; o < end; o += 16) {
    const x0 = v128.load(b0 + o);
    const x1 = W > 1 ? v128.load(b1 + o) : z;
    let av = v128.load(a0 + o);
    c00 = madd(av, x0, c00);
    if (W > 1) c01 = madd(av, x1, c01);
    if (R > 1) {
      av = v128.load(a1 + o);
      c10 = madd(av, x0, c10);
      if (W > 1) c11 = madd(av, x1, c11);
    }
    if (R > 2) {
      av = v128.load(a2 + o);
      c20 = madd(av, x0, c20);
      if (W > 1) c21 = madd(av, x1, c21);
      av = v128.load(a3 + o);
      c30 = madd(av, x0, c30);
      if (W > 1) c31 = madd(av, x1, c31);
    }
  }
  const s0 = laneSums4(c00, c10, c20, c30);
  const s1 = laneSums4(c01, c11, c21, c31);
  const st = <usize>ldc << 2;
  decodePut(c, f32x4.extract_lane(s0, 0), a0, b0, k4, K, accumulate);
  if (W > 1) decodePut(c + 4, f32x4.extract_lane(s1, 0), a0, b1, k4, K, accumulate);
  if (R > 1) {
    decodePut(c + st, f32x4.extract_lane(s0, 1), a1, b0, k4, K, accumulate);
    if (W > 1) decodePut(c + st + 4, f32x4.extract_lane(s1, 1), a1, b1, k4, K, accumulate);
  }
  if (R > 2) {
    decodePut(c + st * 2, f32x4.extract_lane(s0, 2), a2, b0, k4, K, accumulate);
    decodePut(c + st * 3, f32x4.extract_lane(s0, 3), a3, b0, k4, K, accumulate);
    if (W > 1) {
      decodePut(c + st * 2 + 4, f32x4.extract_lane(s1, 2), a2, b1, k4, K, accumulate);
      decodePut(c + st * 3 + 4, f32x4.extract_lane(s1, 3), a3, b1, k4, K, accumulate);
    }
  }
}

/** Rows of B per read-ahead group of gemmDecodeBT, and how many groups ahead it reads. */
const AHEAD_ROWS: i32 = 8;
const AHEAD_GROUPS: i32 = 2;

/** Every row of A (4, 2, then 1 at a time) against the W rows of B at b0, written to columns from c. */
// @ts-ignore: decorator
@inline
function decodeColumns(
  W: i32, M: i32, K: i32, a: usize, b0: usize, rb: usize, k4: i32, c: usize, ldc: i32, accumulate: i32,
): void {
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    decodeTile(4, W, a + <usize>i * rb, b0, rb, k4, K, c + (<usize>(i * ldc) << 2), ldc, accumulate);
  }
  if (i + 2 <= M) {
    decodeTile(2, W, a + <usize>i * rb, b0, rb, k4, K, c + (<usize>(i * ldc) << 2), ldc, accumulate);
    i += 2;
  }
  if (i < M) decodeTile(1, W, a + <usize>i * rb, b0, rb, k4, K, c + (<usize>(i * ldc) << 2), ldc, accumulate);
}

/**
 * C[M,N] (+)= A[M,K]·B[N,K]ᵀ for a few rows of A (decode steps; x·Wᵀ with W the weight), C(i, j) at
 * c[i*ldc + j], nothing packed: B-stationary, two rows of B (12 KB at K = 1536) stay in L1 while every
 * row of A passes over them in 4-row register tiles (8 f32x4 accumulators of dot products along k), so
 * B streams from memory once and A (M·K floats) stays in L1/L2. B streams from DRAM in a decode step
 * (the weights are far larger than the caches): every AHEAD_ROWS rows, one load per cache line reads
 * the rows AHEAD_GROUPS groups ahead, so their misses overlap this group's arithmetic (no prefetch
 * instruction in WASM; those loads are OR-ed into `sink`, 16 bytes of the caller's scratch, so they
 * stay). Every entry is the same sum in the same order (k4 = K rounded down to 4 in f32x4 lanes,
 * laneSums4, then the k ≥ k4 terms) whatever tile or column range computes it: thread shares may cut
 * the columns anywhere.
 */
export function gemmDecodeBT(
  M: i32, N: i32, K: i32, a: usize, b: usize, c: usize, ldc: i32, accumulate: i32, sink: usize,
): void {
  if (M <= 0 || N <= 0) return;
  const rb = <usize>K << 2;
  const k4 = K & ~3;
  const groupBytes = rb * <usize>AHEAD_ROWS;
  const bend = b + <usize>N * rb;
  let seen = v128.load(sink);
  let j = 0;
  for (; j + 2 <= N; j += 2) {
    const b0 = b + <usize>j * rb;
    if (j % AHEAD_ROWS == 0) {
      const p1 = min(b0 + groupBytes * <usize>(AHEAD_GROUPS + 1), bend);
      for (let p = b0 + groupBytes * <usize>AHEAD_GROUPS; p < p1; p += 64) seen = v128.or(seen, v128.load(p));
    }
    decodeColumns(2, M, K, a, b0, rb, k4, c + (<usize>j << 2), ldc, accumulate);
  }
  if (j < N) decodeColumns(1, M, K, a, b + <usize>j * rb, rb, k4, c + (<usize>j << 2), ldc, accumulate);
  v128.store(sink, seen);
}
