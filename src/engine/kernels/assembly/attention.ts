// Causal multi-head attention forward/backward (AssemblyScript, f32x4 over the head dimension).
// Layout as in kernels/types.ts: q,k,v,out [B,T,C] with heads interleaved (C = NH·hs), att [B,NH,T,T].
// Head dimension loops use f32x4 for the first hs&~3 lanes and scalars for the rest.

import { madd } from './madd';

// @ts-ignore: decorator
@inline
function dot(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) acc = madd(v128.load(a + (<usize>i << 2)), v128.load(b + (<usize>i << 2)), acc);
  let s = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) s += load<f32>(a + (<usize>i << 2)) * load<f32>(b + (<usize>i << 2));
  return s;
}

/** y[0..n) += alpha * x[0..n) */
// @ts-ignore: decorator
@inline
function axpy(y: usize, alpha: f32, x: usize, n: i32): void {
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

export function attentionForward(out: usize, att: usize, q: usize, k: usize, v: usize, B: i32, T: i32, C: i32, NH: i32): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < T; t++) {
        const row = att + (<usize>(((b * NH + h) * T + t) * T) << 2);
        const qo = q + (<usize>((b * T + t) * C + h * hs) << 2);
        let mx: f32 = -Infinity;
        for (let s = 0; s <= t; s++) {
          const d = dot(qo, k + (<usize>((b * T + s) * C + h * hs) << 2), hs) * scale;
          store<f32>(row + (<usize>s << 2), d);
          if (d > mx) mx = d;
        }
        let sum: f32 = 0;
        for (let s = 0; s <= t; s++) {
          const e = Mathf.exp(load<f32>(row + (<usize>s << 2)) - mx);
          store<f32>(row + (<usize>s << 2), e);
          sum += e;
        }
        const inv: f32 = 1 / sum;
        for (let s = 0; s <= t; s++) store<f32>(row + (<usize>s << 2), load<f32>(row + (<usize>s << 2)) * inv);
        for (let s = t + 1; s < T; s++) store<f32>(row + (<usize>s << 2), 0);
        const oo = out + (<usize>((b * T + t) * C + h * hs) << 2);
        memory.fill(oo, 0, <usize>hs << 2);
        for (let s = 0; s <= t; s++) axpy(oo, load<f32>(row + (<usize>s << 2)), v + (<usize>((b * T + s) * C + h * hs) << 2), hs);
      }
    }
  }
}

/** Accumulates dq, dk, dv. `scratch` holds T floats. */
export function attentionBackward(dq: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, B: i32, T: i32, C: i32, NH: i32, scratch: usize): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < T; t++) {
        const row = att + (<usize>(((b * NH + h) * T + t) * T) << 2);
        const off = <usize>((b * T + t) * C + h * hs) << 2;
        let dotSum: f32 = 0;
        for (let s = 0; s <= t; s++) {
          const vo = <usize>((b * T + s) * C + h * hs) << 2;
          const a = load<f32>(row + (<usize>s << 2));
          const d = dot(dout + off, v + vo, hs);
          axpy(dv + vo, a, dout + off, hs);
          store<f32>(scratch + (<usize>s << 2), d);
          dotSum += d * a;
        }
        for (let s = 0; s <= t; s++) {
          const a = load<f32>(row + (<usize>s << 2));
          const dpre = a * (load<f32>(scratch + (<usize>s << 2)) - dotSum) * scale;
          const ko = <usize>((b * T + s) * C + h * hs) << 2;
          axpy(dq + off, dpre, k + ko, hs);
          axpy(dk + ko, dpre, q + off, hs);
        }
      }
    }
  }
}

/**
 * One query row attending over T contiguous cached positions (incremental decoding): q, out [C];
 * k, v [T, C]; all heads. `scores` holds T floats. Same arithmetic as attentionForward's last row.
 */
export function decodeAttention(out: usize, q: usize, k: usize, v: usize, T: i32, C: i32, NH: i32, scores: usize): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  for (let h = 0; h < NH; h++) {
    const qo = q + (<usize>(h * hs) << 2);
    let mx: f32 = -Infinity;
    for (let s = 0; s < T; s++) {
      const d = dot(qo, k + (<usize>(s * C + h * hs) << 2), hs) * scale;
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
    const oo = out + (<usize>(h * hs) << 2);
    memory.fill(oo, 0, <usize>hs << 2);
    for (let s = 0; s < T; s++) axpy(oo, load<f32>(scores + (<usize>s << 2)) * inv, v + (<usize>(s * C + h * hs) << 2), hs);
  }
}
