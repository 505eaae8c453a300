// Gated MLP activation over n elements: out = silu(gate) ⊙ up, silu(g) = g·σ(g), σ(g) = 1/(1+e^{-g}).
// Backward writes dgate = dout·up·σ(g)·(1 + g·(1 − σ(g))) and dup = dout·silu(g).
// Four lanes at a time with expv; the tail uses the same exp arithmetic one lane at a time.

import { expv, exps } from './expv';

export function swigluForward(out: usize, gate: usize, up: usize, n: i32): void {
  const one = f32x4.splat(1);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i << 2;
    const g = v128.load(gate + o);
    const sig = f32x4.div(one, f32x4.add(one, expv(f32x4.neg(g))));
    v128.store(out + o, f32x4.mul(f32x4.mul(g, sig), v128.load(up + o)));
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const g = load<f32>(gate + o);
    const sig: f32 = 1 / (1 + exps(-g));
    store<f32>(out + o, g * sig * load<f32>(up + o));
  }
}

export function swigluBackward(dgate: usize, dup: usize, dout: usize, gate: usize, up: usize, n: i32): void {
  const one = f32x4.splat(1);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i << 2;
    const g = v128.load(gate + o);
    const d = v128.load(dout + o);
    const sig = f32x4.div(one, f32x4.add(one, expv(f32x4.neg(g))));
    v128.store(dup + o, f32x4.mul(d, f32x4.mul(g, sig)));
    const dsilu = f32x4.mul(sig, f32x4.add(one, f32x4.mul(g, f32x4.sub(one, sig))));
    v128.store(dgate + o, f32x4.mul(f32x4.mul(d, v128.load(up + o)), dsilu));
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const g = load<f32>(gate + o);
    const d = load<f32>(dout + o);
    const sig: f32 = 1 / (1 + exps(-g));
    store<f32>(dup + o, d * (g * sig));
    store<f32>(dgate + o, d * load<f32>(up + o) * (sig * (1 + g * (1 - sig))));
  }
}
