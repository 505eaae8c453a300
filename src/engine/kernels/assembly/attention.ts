// Causal multi-head attention forward/backward (AssemblyScript). Training-time attention runs through
// the GEMM micro-kernel (matmul.ts) per (sequence, head); incremental decoding uses dot/axpy over the
// head dimension, with grouped-query attention (several query heads per cached key/value head): one
// row over contiguous K/V (decodeAttention), or many rows over a paged KV cache read in place, four
// positions at a time (pagedAttention).
// Layout as in kernels/types.ts: q,k,v,out [B,T,C] with heads interleaved (C = NH·hs), att [B,NH,T,T].
// Head dimension loops use f32x4 for the first hs&~3 lanes and scalars for the rest.

import { madd } from './madd';
import { expv, exps } from './expv';
import { gemmCore, laneSums4, zeroFloats, CAUSAL_N, CAUSAL_K_LOWER, CAUSAL_K_UPPER, KC, MR, NR } from './matmul';

// @ts-ignore: decorator
@inline
export function dot(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) acc = madd(v128.load(a + (<usize>i << 2)), v128.load(b + (<usize>i << 2)), acc);
  let s = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)
    + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) s += load<f32>(a + (<usize>i << 2)) * load<f32>(b + (<usize>i << 2));
  return s;
}

/** y[0..n) += alpha * x[0..n) */
// @ts-ignore: decorator
@inline
export function axpy(y: usize, alpha: f32, x: usize, n: i32): void {
  const av = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const p = y + (<usize>i << 2);
    v128.store(p, madd(av, v128.load(x + (<usize>i << 2)), v128.load(p)));
  }
  for (; i < n; i++) {
    const p = y + (<usize>i << 2);
    store<f32>(p, load<f32>(p) + alpha * load<f32>(x + (<usize>i << 2)));
  }
}

/** The dot products of a with the rows b + i·stride (i < 4), n long, as one vector (laneSums4, then the tail). */
// @ts-ignore: decorator
@inline
export function dot4(a: usize, b: usize, stride: usize, n: i32): v128 {
  const z = f32x4.splat(0);
  let a0 = z, a1 = z, a2 = z, a3 = z;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i << 2;
    const av = v128.load(a + o);
    const bo = b + o;
    a0 = madd(av, v128.load(bo), a0);
    a1 = madd(av, v128.load(bo + stride), a1);
    a2 = madd(av, v128.load(bo + stride * 2), a2);
    a3 = madd(av, v128.load(bo + stride * 3), a3);
  }
  let sum = laneSums4(a0, a1, a2, a3);
  if (i < n) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; i < n; i++) {
      const o = <usize>i << 2;
      const x = load<f32>(a + o);
      t0 += x * load<f32>(b + o);
      t1 += x * load<f32>(b + stride + o);
      t2 += x * load<f32>(b + stride * 2 + o);
      t3 += x * load<f32>(b + stride * 3 + o);
    }
    const tail = f32x4.replace_lane(f32x4.replace_lane(f32x4.replace_lane(f32x4.splat(t0), 1, t1), 2, t2), 3, t3);
    sum = f32x4.add(sum, tail);
  }
  return sum;
}

/** y[0..n) += w0·x0 + w1·x1 + w2·x2 + w3·x3 (w_i: lane i of w4; rows x_i at x + i·stride), added in that order. */
// @ts-ignore: decorator
@inline
export function axpy4(y: usize, w4: v128, x: usize, stride: usize, n: i32): void {
  const w0 = f32x4.splat(f32x4.extract_lane(w4, 0));
  const w1 = f32x4.splat(f32x4.extract_lane(w4, 1));
  const w2 = f32x4.splat(f32x4.extract_lane(w4, 2));
  const w3 = f32x4.splat(f32x4.extract_lane(w4, 3));
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i << 2;
    const xo = x + o;
    let acc = madd(w0, v128.load(xo), v128.load(y + o));
    acc = madd(w1, v128.load(xo + stride), acc);
    acc = madd(w2, v128.load(xo + stride * 2), acc);
    v128.store(y + o, madd(w3, v128.load(xo + stride * 3), acc));
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    let acc = load<f32>(y + o) + f32x4.extract_lane(w4, 0) * load<f32>(x + o);
    acc += f32x4.extract_lane(w4, 1) * load<f32>(x + stride + o);
    acc += f32x4.extract_lane(w4, 2) * load<f32>(x + stride * 2 + o);
    store<f32>(y + o, acc + f32x4.extract_lane(w4, 3) * load<f32>(x + stride * 3 + o));
  }
}

/** Bytes of scratch attentionForward/attentionBackward need for sequences of T and heads of hs. */
export function attentionScratchBytes(T: i32, hs: i32): i32 {
  return packBBytes(T, hs) + PACK_A_BYTES + T * T * 4;
}

const PACK_A_BYTES: i32 = (KC * MR + MR * NR) * 4;

// @ts-ignore: decorator
@inline
function packBBytes(T: i32, hs: i32): i32 {
  // the largest packed B panel set: [min(hs, KC)][T rounded to NR] for scores, [min(T, KC)][hs rounded]
  // for products with V/K/Q
  const a = min(hs, KC) * (((T + NR - 1) / NR) * NR);
  const b = min(T, KC) * (((hs + NR - 1) / NR) * NR);
  return ((max(a, b) * 4 + 15) / 16) * 16;
}

/**
 * Row t of P holds scores for s ≤ t: P[t, s] = softmax_s(scale · P[t, s]); entries s > t become 0.
 */
function causalSoftmax(P: usize, T: i32, scale: f32): void {
  const sc = f32x4.splat(scale);
  for (let t = 0; t < T; t++) {
    const row = P + (<usize>(t * T) << 2);
    const n = t + 1;
    let mv = f32x4.splat(-Infinity);
    let s = 0;
    for (; s + 4 <= n; s += 4) mv = f32x4.pmax(mv, v128.load(row + (<usize>s << 2)));
    let mx = max(
      max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; s < n; s++) mx = max(mx, load<f32>(row + (<usize>s << 2)));
    const shift: f32 = -mx * scale;
    const sh = f32x4.splat(shift);
    let sv = f32x4.splat(0);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const p = row + (<usize>s << 2);
      const e = expv(madd(v128.load(p), sc, sh));
      v128.store(p, e);
      sv = f32x4.add(sv, e);
    }
    let sum = f32x4.extract_lane(sv, 0) + f32x4.extract_lane(sv, 1)
      + f32x4.extract_lane(sv, 2) + f32x4.extract_lane(sv, 3);
    for (; s < n; s++) {
      const p = row + (<usize>s << 2);
      const e = exps(load<f32>(p) * scale + shift);
      store<f32>(p, e);
      sum += e;
    }
    const inv = f32x4.splat(<f32>1 / sum);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const p = row + (<usize>s << 2);
      v128.store(p, f32x4.mul(v128.load(p), inv));
    }
    for (; s < n; s++) {
      const p = row + (<usize>s << 2);
      store<f32>(p, load<f32>(p) * f32x4.extract_lane(inv, 0));
    }
    if (n < T) zeroFloats(row + (<usize>n << 2), T - n);
  }
}

/**
 * Items i0..i1 of a packed batch, item i = (sequence ⌊i/NH⌋, head i mod NH): `seqs` holds an i32
 * triple per sequence (row offset, attention-probability offset, length T). For each item:
 * S = Q_h·K_hᵀ (causal tiles only), P = softmax(S/√hs) into att, O_h = P·V_h, all through the GEMM
 * micro-kernel with strided operands (heads interleaved in [rows, C]). `scratch` holds
 * attentionScratchBytes(max T, hs). Threads may run disjoint item ranges over the same buffers (each
 * with its own scratch): an item writes only its own head's columns of its own sequence.
 */
export function attentionForward(
  out: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize, i0: i32, i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  eachHead(false, out, 0, 0, 0, att, q, k, v, seqs, i0, i1, C, NH, scratch);
}

/**
 * Writes dq, dk, dv for items i0..i1 (see attentionForward for items and `seqs`), given dout and att
 * (P) from forward: dP = dO·Vᵀ, dV = Pᵀ·dO, dS = P ⊙ (dP − rowsum(P ⊙ dP)) / √hs, dQ = dS·K,
 * dK = dSᵀ·Q. `scratch` holds attentionScratchBytes(max T, hs).
 */
export function attentionBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize, i0: i32,
  i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  eachHead(true, dq, dk, dv, dout, att, q, k, v, seqs, i0, i1, C, NH, scratch);
}

/** The (sequence, head) loop of both passes: forward writes `o` (out); backward writes o = dq, dk, dv from dout. */
function eachHead(
  backward: bool, o: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize,
  i0: i32, i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  for (let item = i0; item < i1; item++) {
    const b = item / NH;
    const h = item - b * NH;
    const d = seqs + (<usize>(b * 3) << 2);
    const r0 = load<i32>(d);
    const T = load<i32>(d, 8);
    const packB = scratch;
    const packA = scratch + <usize>packBBytes(T, hs);
    const base = <usize>(r0 * C + h * hs) << 2;
    const P = att + (<usize>(load<i32>(d, 4) + h * T * T) << 2);
    if (backward) {
      const qb = q + base;
      const kb = k + base;
      const vb = v + base;
      headBackward(o + base, dk + base, dv + base, dout + base, P, qb, kb, vb, T, C, hs, scale, packB, packA);
    } else {
      gemmCore(T, T, hs, q + base, C, 1, k + base, 1, C, P, T, 0, packB, packA, CAUSAL_N);
      causalSoftmax(P, T, scale);
      gemmCore(T, hs, T, P, T, 1, v + base, C, 1, o + base, C, 0, packB, packA, CAUSAL_K_LOWER);
    }
  }
}

/** One (sequence, head) of attentionBackward; pointers are at the head's first column, rows C apart. */
function headBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, P: usize, q: usize, k: usize, v: usize, T: i32, C: i32, hs: i32,
  scale: f32, packB: usize, packA: usize,
): void {
  const dP = packA + <usize>PACK_A_BYTES;
  gemmCore(T, T, hs, dout, C, 1, v, 1, C, dP, T, 0, packB, packA, CAUSAL_N);
  gemmCore(T, hs, T, P, 1, T, dout, C, 1, dv, C, 0, packB, packA, CAUSAL_K_UPPER);
  const sc = f32x4.splat(scale);
  for (let t = 0; t < T; t++) {
    const pr = P + (<usize>(t * T) << 2);
    const dr = dP + (<usize>(t * T) << 2);
    const n = t + 1;
    let dv4 = f32x4.splat(0);
    let s = 0;
    for (; s + 4 <= n; s += 4) dv4 = madd(v128.load(pr + (<usize>s << 2)), v128.load(dr + (<usize>s << 2)), dv4);
    let rowdot = f32x4.extract_lane(dv4, 0) + f32x4.extract_lane(dv4, 1)
      + f32x4.extract_lane(dv4, 2) + f32x4.extract_lane(dv4, 3);
    for (; s < n; s++) rowdot += load<f32>(pr + (<usize>s << 2)) * load<f32>(dr + (<usize>s << 2));
    const rd = f32x4.splat(rowdot);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const o = <usize>s << 2;
      v128.store(dr + o, f32x4.mul(f32x4.mul(v128.load(pr + o), f32x4.sub(v128.load(dr + o), rd)), sc));
    }
    for (; s < n; s++) {
      const o = <usize>s << 2;
      store<f32>(dr + o, load<f32>(pr + o) * (load<f32>(dr + o) - rowdot) * scale);
    }
    if (n < T) zeroFloats(dr + (<usize>n << 2), T - n);
  }
  gemmCore(T, hs, T, dP, T, 1, k, C, 1, dq, C, 0, packB, packA, CAUSAL_K_LOWER);
  gemmCore(T, hs, T, dP, 1, T, q, C, 1, dk, C, 0, packB, packA, CAUSAL_K_UPPER);
}

/**
 * One query row attending over T contiguous cached positions (incremental decoding) with grouped-query
 * attention: q, out [NH·hd]; k, v [T, NKV·hd]; query head h reads kv head ⌊h / (NH/NKV)⌋ (NKV divides
 * NH; NKV = NH is plain multi-head attention). Writes the heads h0..h1 of out, so threads may run
 * disjoint head ranges, each with its own `scores` (T floats). The math of attentionForward's last
 * row, summed in another order with Mathf.exp (sampler and trainer log-probs agree to ~1e-6, tested).
 */
export function decodeAttention(
  out: usize, q: usize, k: usize, v: usize, T: i32, NH: i32, NKV: i32, hd: i32, h0: i32, h1: i32, scores: usize,
): void {
  const group = NH / NKV;
  const ld = NKV * hd;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  for (let h = h0; h < h1; h++) {
    const qo = q + (<usize>(h * hd) << 2);
    const kvo = (h / group) * hd;
    let mx: f32 = -Infinity;
    for (let s = 0; s < T; s++) {
      const d = dot(qo, k + (<usize>(s * ld + kvo) << 2), hd) * scale;
      store<f32>(scores + (<usize>s << 2), d);
      if (d > mx) mx = d;
    }
    let sum: f32 = 0;
    for (let s = 0; s < T; s++) {
      const e = Mathf.exp(load<f32>(scores + (<usize>s << 2)) - mx);
      store<f32>(scores + (<usize>s << 2), e);
      sum += e;
    }
    const inv: f32 = 1 / sum;
    const oo = out + (<usize>(h * hd) << 2);
    zeroFloats(oo, hd);
    for (let s = 0; s < T; s++) {
      axpy(oo, load<f32>(scores + (<usize>s << 2)) * inv, v + (<usize>(s * ld + kvo) << 2), hd);
    }
  }
}

/**
 * One load per cache line of page table entry `pi`'s P rows (rowBytes each) when positions reach it, OR-ed
 * together: the page's misses then overlap the work on the page before it (WASM has no prefetch).
 */
// @ts-ignore: decorator
@inline
function readAhead(table: usize, pi: i32, T: i32, P: i32, rowBytes: usize): v128 {
  let seen = f32x4.splat(0);
  if (pi * P >= T) return seen;
  const page = <usize>load<u32>(table + (<usize>pi << 2));
  const end = page + <usize>min(P, T - pi * P) * rowBytes;
  for (let p = page; p < end; p += 64) seen = v128.or(seen, v128.load(p));
  return seen;
}

/**
 * Bytes of `scores` pagedAttention needs for G query heads per kv head and rows up to T long: G rows of
 * T rounded up to 4 floats, then 16 bytes where the read-ahead loads are stored so that they stay. Each
 * thread needs all of it: that store lands past the scores, on whatever memory follows them.
 */
export function pagedAttentionScratchBytes(G: i32, T: i32): i32 {
  return G * ((T + 3) & ~3) * 4 + 16;
}

/**
 * Decode attention for many query rows over a paged KV cache, reading cached rows in place. Items
 * i0..i1 are (row r = ⌊i/NKV⌋, kv head g = i mod NKV): row r's query heads g·G..(g+1)·G−1 (G = NH/NKV)
 * attend over positions 0..T−1 (T = lengths[r]), position s lying at row s mod P of the page whose byte
 * address is kPages[r·W + ⌊s/P⌋] (vPages for values; i32 tables, the layer's offset included), rows C
 * floats apart (C = NKV·hd, the cache's width). q, out [R, NH·hd]. Each cached key row is read once for
 * its G query heads (grouped-query attention's saving). Per head: scores scaled by 1/√hd, softmax with
 * expv in 4-lane steps, out = Σ_s p_s·v_s in position order. An item writes only its own heads of its
 * own row, so threads may take disjoint item ranges, each with its own `scores` of
 * pagedAttentionScratchBytes(G, longest T) bytes.
 */
export function pagedAttention(
  out: usize, q: usize, kPages: usize, vPages: usize, lengths: usize, W: i32, P: i32, NH: i32, NKV: i32, hd: i32,
  i0: i32, i1: i32, scores: usize,
): void {
  const G = NH / NKV;
  const C = NKV * hd;
  const rowBytes = <usize>C << 2;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  let seen = f32x4.splat(0);
  let sinkAt: usize = scores;
  for (let item = i0; item < i1; item++) {
    const r = item / NKV;
    const g = item - r * NKV;
    const T = load<i32>(lengths + (<usize>r << 2));
    const Tp = (T + 3) & ~3;
    sinkAt = max(sinkAt, scores + (<usize>(G * Tp) << 2));
    const qh = q + (<usize>(r * NH + g * G) * <usize>hd << 2);
    const oh = out + (<usize>(r * NH + g * G) * <usize>hd << 2);
    const headBytes = <usize>hd << 2;
    const kvOffset = <usize>(g * hd) << 2;
    const kTable = kPages + (<usize>(r * W) << 2);
    const vTable = vPages + (<usize>(r * W) << 2);
    // scores[j, s] = q_j · k_s / √hd, page by page, four positions at a time
    const sc = f32x4.splat(scale);
    seen = v128.or(seen, readAhead(vTable, 0, T, P, rowBytes));
    for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
      const page = <usize>load<u32>(kTable + (<usize>pi << 2)) + kvOffset;
      const n = min(P, T - s0);
      seen = v128.or(seen, readAhead(kTable, pi + 1, T, P, rowBytes));
      let t = 0;
      for (; t + 4 <= n; t += 4) {
        const kr = page + <usize>t * rowBytes;
        for (let j = 0; j < G; j++) {
          const d = dot4(qh + <usize>j * headBytes, kr, rowBytes, hd);
          v128.store(scores + (<usize>(j * Tp + s0 + t) << 2), f32x4.mul(d, sc));
        }
      }
      for (; t < n; t++) {
        const kr = page + <usize>t * rowBytes;
        for (let j = 0; j < G; j++) {
          store<f32>(scores + (<usize>(j * Tp + s0 + t) << 2), dot(qh + <usize>j * headBytes, kr, hd) * scale);
        }
      }
    }
    // softmax per query head, normalised in place
    for (let j = 0; j < G; j++) {
      const row = scores + (<usize>(j * Tp) << 2);
      let mx: f32 = -Infinity;
      for (let s = 0; s < T; s++) mx = max(mx, load<f32>(row + (<usize>s << 2)));
      const m = f32x4.splat(mx);
      let sv = f32x4.splat(0);
      let s = 0;
      for (; s + 4 <= T; s += 4) {
        const p = row + (<usize>s << 2);
        const e = expv(f32x4.sub(v128.load(p), m));
        v128.store(p, e);
        sv = f32x4.add(sv, e);
      }
      let sum = f32x4.extract_lane(sv, 0) + f32x4.extract_lane(sv, 1)
        + f32x4.extract_lane(sv, 2) + f32x4.extract_lane(sv, 3);
      for (; s < T; s++) {
        const p = row + (<usize>s << 2);
        const e = exps(load<f32>(p) - mx);
        store<f32>(p, e);
        sum += e;
      }
      const inv: f32 = 1 / sum;
      for (s = 0; s < T; s++) {
        const p = row + (<usize>s << 2);
        store<f32>(p, load<f32>(p) * inv);
      }
      zeroFloats(oh + <usize>j * headBytes, hd);
    }
    // out_j = Σ_s p[j, s] · v_s, page by page, four value rows at a time, each read once for the G heads
    for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
      const page = <usize>load<u32>(vTable + (<usize>pi << 2)) + kvOffset;
      const n = min(P, T - s0);
      seen = v128.or(seen, readAhead(vTable, pi + 1, T, P, rowBytes));
      let t = 0;
      for (; t + 4 <= n; t += 4) {
        const vr = page + <usize>t * rowBytes;
        for (let j = 0; j < G; j++) {
          axpy4(oh + <usize>j * headBytes, v128.load(scores + (<usize>(j * Tp + s0 + t) << 2)), vr, rowBytes, hd);
        }
      }
      for (; t < n; t++) {
        const vr = page + <usize>t * rowBytes;
        for (let j = 0; j < G; j++) {
          axpy(oh + <usize>j * headBytes, load<f32>(scores + (<usize>(j * Tp + s0 + t) << 2)), vr, hd);
        }
      }
    }
  }
  v128.store(sinkAt, seen);
}
