// exp on f32x4 (Cephes expf: range reduction by n = round(x·log2 e), a degree-6 polynomial on
// |r| ≤ ln2/2, then scaling by 2^n through the exponent bits). Relative error ≈ 2 ulp; inputs are
// clamped to [-87.3, 88.7], so exp of very negative x is ~1e-38 rather than 0 and of large x is
// ~3.4e38 rather than +inf.

import { madd } from './madd';

// @ts-ignore: decorator
@inline
export function expv(x: v128): v128 {
  // pmin/pmax are one instruction each on x86 (min/max need NaN and ±0 fix-ups); inputs are finite
  x = f32x4.pmin(f32x4.pmax(x, f32x4.splat(-87.3)), f32x4.splat(88.7));
  // n = round(x·log2 e) by the 1.5·2^23 trick: adding it leaves n in the low mantissa bits, so n
  // and 2^n come from integer ops (no float rounding or float-to-int conversion instruction)
  const magic = f32x4.splat(12582912.0);
  const t = madd(x, f32x4.splat(1.44269504088896341), magic);
  const n = f32x4.sub(t, magic);
  let r = madd(n, f32x4.splat(-0.693359375), x);
  r = madd(n, f32x4.splat(2.12194440e-4), r);
  let y = f32x4.splat(1.9875691500e-4);
  y = madd(y, r, f32x4.splat(1.3981999507e-3));
  y = madd(y, r, f32x4.splat(8.3334519073e-3));
  y = madd(y, r, f32x4.splat(4.1665795894e-2));
  y = madd(y, r, f32x4.splat(1.6666665459e-1));
  y = madd(y, r, f32x4.splat(5.0000001201e-1));
  y = madd(y, f32x4.mul(r, r), f32x4.add(r, f32x4.splat(1)));
  const scale = i32x4.shl(i32x4.add(i32x4.sub(t, magic), i32x4.splat(127)), 23);
  return f32x4.mul(y, scale);
}

/** Scalar exp with the same arithmetic as one lane of expv (for loop tails). */
// @ts-ignore: decorator
@inline
export function exps(x: f32): f32 {
  return f32x4.extract_lane(expv(f32x4.splat(x)), 0);
}
