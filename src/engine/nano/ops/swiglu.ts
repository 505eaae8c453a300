/**
 * Gated MLP activation: out = silu(gate) ⊙ up, elementwise over [N, F].
 * Backward accumulates into dgate and dup.
 */

export function swigluForward(out: Float32Array, gate: Float32Array, up: Float32Array, size: number): void {
  for (let i = 0; i < size; i++) {
    const g = gate[i];
    out[i] = (g / (1 + Math.exp(-g))) * up[i];
  }
}

export function swigluBackward(dgate: Float32Array, dup: Float32Array, dout: Float32Array, gate: Float32Array, up: Float32Array, size: number): void {
  for (let i = 0; i < size; i++) {
    const g = gate[i];
    const sig = 1 / (1 + Math.exp(-g));
    const silu = g * sig;
    dup[i] += dout[i] * silu;
    dgate[i] += dout[i] * up[i] * sig * (1 + g * (1 - sig));
  }
}
