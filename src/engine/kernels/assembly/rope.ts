// Rotary positions, NeoX half-split (see model/ops/rope.ts for the tables): within each head of size
// hs, dimension i < half pairs with i + half and rotates by the angle of (position, i). Rows of x
// [N, C] rotate in place; `inverse` applies the transpose rotation (the backward pass on gradients).
// positions: N i32; cos, sin: [maxT, half] f32.

export function rope(
  x: usize, positions: usize, N: i32, C: i32, NH: i32, cos: usize, sin: usize, half: i32, inverse: i32,
): void {
  const hs = C / NH;
  for (let n = 0; n < N; n++) {
    const t = <usize>(load<i32>(positions + (<usize>n << 2)) * half) << 2;
    const cr = cos + t;
    const sr = sin + t;
    for (let h = 0; h < NH; h++) {
      const o = x + (<usize>(n * C + h * hs) << 2);
      const ob = o + (<usize>half << 2);
      let i = 0;
      for (; i + 4 <= half; i += 4) {
        const q = <usize>i << 2;
        const c = v128.load(cr + q);
        const s = v128.load(sr + q);
        const a = v128.load(o + q);
        const b = v128.load(ob + q);
        if (inverse) {
          v128.store(o + q, f32x4.add(f32x4.mul(a, c), f32x4.mul(b, s)));
          v128.store(ob + q, f32x4.sub(f32x4.mul(b, c), f32x4.mul(a, s)));
        } else {
          v128.store(o + q, f32x4.sub(f32x4.mul(a, c), f32x4.mul(b, s)));
          v128.store(ob + q, f32x4.add(f32x4.mul(a, s), f32x4.mul(b, c)));
        }
      }
      for (; i < half; i++) {
        const q = <usize>i << 2;
        const c = load<f32>(cr + q);
        const s = load<f32>(sr + q);
        const a = load<f32>(o + q);
        const b = load<f32>(ob + q);
        if (inverse) {
          store<f32>(o + q, a * c + b * s);
          store<f32>(ob + q, b * c - a * s);
        } else {
          store<f32>(o + q, a * c - b * s);
          store<f32>(ob + q, a * s + b * c);
        }
      }
    }
  }
}
