// RMSNorm and (log-)softmax forward/backward over rows (AssemblyScript, f32x4 inner loops).
// Shapes as in kernels/types.ts: x, out, dout, dx [N,C]; weight, dweight [C]; rstd [N].

import { madd } from './madd';
import { expv, exps } from './expv';
import { zeroFloats } from './matmul';

// @ts-ignore: decorator
@inline
function sumSquares(p: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const v = v128.load(p + (<usize>i << 2));
    acc = madd(v, v, acc);
  }
  let s = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)
    + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) {
    const v = load<f32>(p + (<usize>i << 2));
    s += v * v;
  }
  return s;
}

export function rmsnormForward(out: usize, rstd: usize, x: usize, weight: usize, N: i32, C: i32, eps: f32): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>(n * C) << 2;
    const r: f32 = 1.0 / Mathf.sqrt(sumSquares(x + row, C) / <f32>C + eps);
    store<f32>(rstd + (<usize>n << 2), r);
    const rv = f32x4.splat(r);
    let c = 0;
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      v128.store(out + row + o, f32x4.mul(f32x4.mul(v128.load(x + row + o), rv), v128.load(weight + o)));
    }
    for (; c < C; c++) {
      const o = <usize>c << 2;
      store<f32>(out + row + o, load<f32>(x + row + o) * r * load<f32>(weight + o));
    }
  }
}

/** dx += ..., dweight += Σ_rows dout·x·rstd (rows in order, so a row range gives a partial sum). */
export function rmsnormBackward(
  dx: usize, dweight: usize, dout: usize, x: usize, weight: usize, rstd: usize, N: i32, C: i32,
): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>(n * C) << 2;
    const r = load<f32>(rstd + (<usize>n << 2));
    let dv = f32x4.splat(0);
    let c = 0;
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      dv = madd(f32x4.mul(v128.load(dout + row + o), v128.load(weight + o)), v128.load(x + row + o), dv);
    }
    let dot = f32x4.extract_lane(dv, 0) + f32x4.extract_lane(dv, 1)
      + f32x4.extract_lane(dv, 2) + f32x4.extract_lane(dv, 3);
    for (; c < C; c++) {
      const o = <usize>c << 2;
      dot += load<f32>(dout + row + o) * load<f32>(weight + o) * load<f32>(x + row + o);
    }
    const k = (r * r * r) / <f32>C;
    const rv = f32x4.splat(r);
    const kd = f32x4.splat(k * dot);
    c = 0;
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      const g = v128.load(dout + row + o);
      const xv = v128.load(x + row + o);
      v128.store(dweight + o, madd(f32x4.mul(g, xv), rv, v128.load(dweight + o)));
      const dxv = madd(f32x4.mul(rv, v128.load(weight + o)), g, v128.load(dx + row + o));
      v128.store(dx + row + o, f32x4.sub(dxv, f32x4.mul(kd, xv)));
    }
    for (; c < C; c++) {
      const o = <usize>c << 2;
      const g = load<f32>(dout + row + o);
      const xv = load<f32>(x + row + o);
      store<f32>(dweight + o, load<f32>(dweight + o) + g * xv * r);
      store<f32>(dx + row + o, load<f32>(dx + row + o) + r * load<f32>(weight + o) * g - k * dot * xv);
    }
  }
}

/**
 * Row groups g0..g1 of rmsnormBackward over N rows: group g is rows [g·groupRows, min(N, (g+1)·groupRows))
 * and writes its weight-gradient sum to partials + g·C (zeroed here first); dx accumulates as usual.
 * The groups depend only on N and groupRows, so the partial sums are the same for any thread split.
 */
export function rmsnormBackwardGroups(
  dx: usize, partials: usize, dout: usize, x: usize, weight: usize, rstd: usize, N: i32, C: i32, groupRows: i32,
  g0: i32, g1: i32,
): void {
  for (let g = g0; g < g1; g++) {
    const n0 = g * groupRows;
    const pg = partials + (<usize>(g * C) << 2);
    zeroFloats(pg, C);
    const off = <usize>(n0 * C) << 2;
    rmsnormBackward(dx + off, pg, dout + off, x + off, weight, rstd + (<usize>n0 << 2), min(groupRows, N - n0), C);
  }
}

/** dst[c] += src[0·C + c] + src[1·C + c] + ... + src[(G−1)·C + c], added one row at a time in order. */
export function addRows(dst: usize, src: usize, G: i32, C: i32): void {
  for (let g = 0; g < G; g++) {
    const row = src + (<usize>(g * C) << 2);
    let c = 0;
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      v128.store(dst + o, f32x4.add(v128.load(dst + o), v128.load(row + o)));
    }
    for (; c < C; c++) {
      const o = <usize>c << 2;
      store<f32>(dst + o, load<f32>(dst + o) + load<f32>(row + o));
    }
  }
}

export function softmaxForward(out: usize, x: usize, N: i32, C: i32, log: i32): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>(n * C) << 2;
    const xr = x + row;
    const orow = out + row;
    let mv = f32x4.splat(-Infinity);
    let c = 0;
    for (; c + 4 <= C; c += 4) mv = f32x4.pmax(mv, v128.load(xr + (<usize>c << 2)));
    let mx = max(
      max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; c < C; c++) mx = max(mx, load<f32>(xr + (<usize>c << 2)));
    const m = f32x4.splat(mx);
    let sv = f32x4.splat(0);
    c = 0;
    // softmax: the exponentials go to out (x may alias out; it is not read again then)
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      const e = expv(f32x4.sub(v128.load(xr + o), m));
      if (!log) v128.store(orow + o, e);
      sv = f32x4.add(sv, e);
    }
    let sum = f32x4.extract_lane(sv, 0) + f32x4.extract_lane(sv, 1)
      + f32x4.extract_lane(sv, 2) + f32x4.extract_lane(sv, 3);
    for (; c < C; c++) {
      const o = <usize>c << 2;
      const e = exps(load<f32>(xr + o) - mx);
      if (!log) store<f32>(orow + o, e);
      sum += e;
    }
    const k = log ? f32x4.splat(mx + Mathf.log(sum)) : f32x4.splat(<f32>1 / sum);
    c = 0;
    for (; c + 4 <= C; c += 4) {
      const o = <usize>c << 2;
      v128.store(orow + o, log ? f32x4.sub(v128.load(xr + o), k) : f32x4.mul(v128.load(orow + o), k));
    }
    const ks = f32x4.extract_lane(k, 0);
    for (; c < C; c++) {
      const o = <usize>c << 2;
      store<f32>(orow + o, log ? load<f32>(xr + o) - ks : load<f32>(orow + o) * ks);
    }
  }
}

/** softmax backward (log = 0, y = softmax) or log-softmax backward (log = 1, y = log_softmax); accumulates dx. */
export function softmaxBackward(dx: usize, dout: usize, y: usize, N: i32, C: i32, log: i32): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>(n * C) << 2;
    let s: f32 = 0;
    for (let c = 0; c < C; c++) {
      const o = row + (<usize>c << 2);
      s += log ? load<f32>(dout + o) : load<f32>(dout + o) * load<f32>(y + o);
    }
    for (let c = 0; c < C; c++) {
      const o = row + (<usize>c << 2);
      const g = load<f32>(dout + o);
      const yv = load<f32>(y + o);
      store<f32>(dx + o, load<f32>(dx + o) + (log ? g - Mathf.exp(yv) * s : yv * (g - s)));
    }
  }
}

/**
 * Token sampling's view of logit rows x [N, V]: per row n at inverse temperature invT[n], with
 * d = (x − max x)·invT (= z − max z for z = x·invT), writes e = exp(d) into out (unnormalised; out may
 * alias x) and float64 stats[n·3 ..] = [logsumexp z, entropy −Σ p·log p, S = Σ e], the sums taken in
 * float64 over f32 lanes: lse = max z + log S, entropy = log S − Σ e·d / S.
 */
export function samplingStats(out: usize, stats: usize, x: usize, invT: usize, N: i32, V: i32): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>n * <usize>V << 2;
    const xr = x + row;
    const orow = out + row;
    const t = load<f32>(invT + (<usize>n << 2));
    let mv = f32x4.splat(-Infinity);
    let c = 0;
    for (; c + 4 <= V; c += 4) mv = f32x4.pmax(mv, v128.load(xr + (<usize>c << 2)));
    let mx = max(
      max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; c < V; c++) mx = max(mx, load<f32>(xr + (<usize>c << 2)));
    const m = f32x4.splat(mx);
    const tv = f32x4.splat(t);
    let s0 = f64x2.splat(0), s1 = f64x2.splat(0), w0 = f64x2.splat(0), w1 = f64x2.splat(0);
    c = 0;
    for (; c + 4 <= V; c += 4) {
      const o = <usize>c << 2;
      // d ≥ −87.3 (where expv clamps anyway): a −∞ logit adds e·d ≈ −1e−36, not −∞·0
      const d = f32x4.pmax(f32x4.mul(f32x4.sub(v128.load(xr + o), m), tv), f32x4.splat(-87.3));
      const e = expv(d);
      v128.store(orow + o, e);
      const ed = f32x4.mul(e, d);
      s0 = f64x2.add(s0, f64x2.promote_low_f32x4(e));
      s1 = f64x2.add(s1, f64x2.promote_low_f32x4(v128.shuffle<f32>(e, e, 2, 3, 0, 1)));
      w0 = f64x2.add(w0, f64x2.promote_low_f32x4(ed));
      w1 = f64x2.add(w1, f64x2.promote_low_f32x4(v128.shuffle<f32>(ed, ed, 2, 3, 0, 1)));
    }
    const sv = f64x2.add(s0, s1);
    const wv = f64x2.add(w0, w1);
    let S = f64x2.extract_lane(sv, 0) + f64x2.extract_lane(sv, 1);
    let W = f64x2.extract_lane(wv, 0) + f64x2.extract_lane(wv, 1);
    for (; c < V; c++) {
      const o = <usize>c << 2;
      const d = max((load<f32>(xr + o) - mx) * t, <f32>-87.3);
      const e = exps(d);
      store<f32>(orow + o, e);
      S += <f64>e;
      W += <f64>(e * d);
    }
    const logS = Math.log(S);
    const st = stats + (<usize>n * 24);
    store<f64>(st, <f64>mx * <f64>t + logS);
    store<f64>(st, logS - W / S, 8);
    store<f64>(st, S, 16);
  }
}
