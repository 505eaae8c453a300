// c + a·b on f32x4. Built twice (scripts/build-wasm.mjs): with relaxed SIMD enabled this is one fused
// multiply-add (f32x4.relaxed_madd: a single FMA instruction on CPUs that have one), otherwise a mul
// then an add. ASC_FEATURE_RELAXED_SIMD is a compile-time constant, so no branch survives.

// @ts-ignore: decorator
@inline
export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(c, f32x4.mul(a, b));
}
