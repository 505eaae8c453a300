// Training-step kernels outside the model graph: the gradient of a token-level loss w.r.t. the logits
// (from log-softmax rows), and the AdamW update. Four lanes at a time, scalar tails.

import { madd } from './madd';
import { expv, exps } from './expv';

/**
 * Per row n of lsm [N, V] (log-softmax): p = exp(lsm), H = −Σ p·lsm → entropy[n];
 * dlogits[n] = p ⊙ (bonus[n]·(lsm + H) − coef[n]), then dlogits[n, targets[n]] += coef[n].
 * Overwrites dlogits. coef[n] is d loss / d lsm[n, target]; bonus[n] the entropy-bonus weight.
 */
export function logitGrad(
  dlogits: usize, entropy: usize, lsm: usize, coef: usize, bonus: usize, targets: usize, N: i32, V: i32,
): void {
  for (let n = 0; n < N; n++) {
    const row = <usize>(n * V) << 2;
    const l = lsm + row;
    const d = dlogits + row;
    let hv = f32x4.splat(0);
    let v = 0;
    for (; v + 4 <= V; v += 4) {
      const o = <usize>v << 2;
      const x = v128.load(l + o);
      const p = expv(x);
      v128.store(d + o, p);
      hv = madd(p, x, hv);
    }
    let h = f32x4.extract_lane(hv, 0) + f32x4.extract_lane(hv, 1)
      + f32x4.extract_lane(hv, 2) + f32x4.extract_lane(hv, 3);
    for (; v < V; v++) {
      const o = <usize>v << 2;
      const x = load<f32>(l + o);
      const p = exps(x);
      store<f32>(d + o, p);
      h += p * x;
    }
    const H: f32 = -h;
    store<f32>(entropy + (<usize>n << 2), H);
    const c = load<f32>(coef + (<usize>n << 2));
    const b = load<f32>(bonus + (<usize>n << 2));
    const cv = f32x4.splat(c);
    const bv = f32x4.splat(b);
    const Hv = f32x4.splat(H);
    v = 0;
    for (; v + 4 <= V; v += 4) {
      const o = <usize>v << 2;
      const p = v128.load(d + o);
      v128.store(d + o, f32x4.mul(p, f32x4.sub(f32x4.mul(bv, f32x4.add(v128.load(l + o), Hv)), cv)));
    }
    for (; v < V; v++) {
      const o = <usize>v << 2;
      store<f32>(d + o, load<f32>(d + o) * (b * (load<f32>(l + o) + H) - c));
    }
    const t = d + (<usize>load<i32>(targets + (<usize>n << 2)) << 2);
    store<f32>(t, load<f32>(t) + c);
  }
}

/**
 * AdamW on n parameters: g' = g·gradScale; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'²;
 * x −= lr·(m/bc1 / (√(v/bc2) + eps) + wd·x).
 */
export function adamw(
  x: usize, g: usize, m: usize, v: usize, n: i32, lr: f32, beta1: f32, beta2: f32, eps: f32, wd: f32, bc1: f32,
  bc2: f32, gradScale: f32,
): void {
  const b1 = f32x4.splat(beta1), c1 = f32x4.splat(1 - beta1);
  const b2 = f32x4.splat(beta2), c2 = f32x4.splat(1 - beta2);
  const ib1 = f32x4.splat(1 / bc1), ib2 = f32x4.splat(1 / bc2);
  const ep = f32x4.splat(eps), wdv = f32x4.splat(wd), lrv = f32x4.splat(lr), gs = f32x4.splat(gradScale);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i << 2;
    const gi = f32x4.mul(v128.load(g + o), gs);
    const mi = f32x4.add(f32x4.mul(b1, v128.load(m + o)), f32x4.mul(c1, gi));
    const vi = f32x4.add(f32x4.mul(b2, v128.load(v + o)), f32x4.mul(c2, f32x4.mul(gi, gi)));
    v128.store(m + o, mi);
    v128.store(v + o, vi);
    const xi = v128.load(x + o);
    const adam = f32x4.div(f32x4.mul(mi, ib1), f32x4.add(f32x4.sqrt(f32x4.mul(vi, ib2)), ep));
    const step = f32x4.add(adam, f32x4.mul(wdv, xi));
    v128.store(x + o, f32x4.sub(xi, f32x4.mul(lrv, step)));
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const gi = load<f32>(g + o) * gradScale;
    const mi = beta1 * load<f32>(m + o) + (1 - beta1) * gi;
    const vi = beta2 * load<f32>(v + o) + (1 - beta2) * gi * gi;
    store<f32>(m + o, mi);
    store<f32>(v + o, vi);
    const xi = load<f32>(x + o);
    store<f32>(x + o, xi - lr * ((mi * (1 / bc1)) / (Mathf.sqrt(vi * (1 / bc2)) + eps) + wd * xi));
  }
}
