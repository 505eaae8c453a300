/**
 * Rotary positions, "NeoX" half-split: within each head (size hs), dimension i < hs/2 pairs with
 * i + hs/2 and rotates by angle pos · theta^(-2i/hs). Tables hold cos/sin [maxT, hs/2].
 * Forward rotates in place; backward applies the inverse rotation to the gradient in place.
 */

export interface RopeTables {
  /** hs/2 */
  half: number;
  /** [maxT, half] */
  cos: Float32Array;
  /** [maxT, half] */
  sin: Float32Array;
}

export function ropeTables(maxT: number, headSize: number, theta: number): RopeTables {
  const half = headSize / 2;
  const cos = new Float32Array(maxT * half);
  const sin = new Float32Array(maxT * half);
  for (let p = 0; p < maxT; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, (-2 * i) / headSize);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { half, cos, sin };
}

/**
 * Rotate rows of x [N, C] (C = NH·hs) in place; row n sits at position positions[n].
 */
export function ropeForward(x: Float32Array, positions: ArrayLike<number>, N: number, C: number, NH: number, tables: RopeTables): void {
  const hs = C / NH;
  const half = tables.half;
  for (let n = 0; n < N; n++) {
    const t = positions[n] * half;
    for (let h = 0; h < NH; h++) {
      const o = n * C + h * hs;
      for (let i = 0; i < half; i++) {
        const c = tables.cos[t + i];
        const s = tables.sin[t + i];
        const a = x[o + i];
        const b = x[o + i + half];
        x[o + i] = a * c - b * s;
        x[o + i + half] = a * s + b * c;
      }
    }
  }
}

/** Given d(out) in dx, replace it with d(in) (the transpose rotation), in place. */
export function ropeBackward(dx: Float32Array, positions: ArrayLike<number>, N: number, C: number, NH: number, tables: RopeTables): void {
  const hs = C / NH;
  const half = tables.half;
  for (let n = 0; n < N; n++) {
    const t = positions[n] * half;
    for (let h = 0; h < NH; h++) {
      const o = n * C + h * hs;
      for (let i = 0; i < half; i++) {
        const c = tables.cos[t + i];
        const s = tables.sin[t + i];
        const ga = dx[o + i];
        const gb = dx[o + i + half];
        dx[o + i] = ga * c + gb * s;
        dx[o + i + half] = -ga * s + gb * c;
      }
    }
  }
}
