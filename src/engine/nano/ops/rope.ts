/**
 * Rotary position tables, "NeoX" half-split: within each head (size hs), dimension i < hs/2 pairs with
 * i + hs/2 and rotates by angle pos · theta^(-2i/hs). Tables hold cos/sin [maxT, hs/2], allocated by
 * `alloc` (the kernels' memory, so the rotation kernel reads them in place); the rotation itself is
 * the `rope` kernel (kernels/types.ts).
 */

export interface RopeTables {
  /** hs/2 */
  half: number;
  /** [maxT, half] */
  cos: Float32Array;
  /** [maxT, half] */
  sin: Float32Array;
}

export function ropeTables(maxT: number, headSize: number, theta: number, alloc: (n: number) => Float32Array = (n) => new Float32Array(n)): RopeTables {
  const half = headSize / 2;
  const cos = alloc(maxT * half);
  const sin = alloc(maxT * half);
  for (let p = 0; p < maxT; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, (-2 * i) / headSize);
      // float32 values whatever the array type (the float64 reference backend must see the same table)
      cos[p * half + i] = Math.fround(Math.cos(angle));
      sin[p * half + i] = Math.fround(Math.sin(angle));
    }
  }
  return { half, cos, sin };
}
