/** Token embedding lookup: out[N, C] = table[tokens[n]]; backward accumulates rows into dtable. */

export function embeddingForward(
  out: Float32Array,
  table: Float32Array,
  tokens: ArrayLike<number>,
  N: number,
  C: number,
): void {
  for (let n = 0; n < N; n++) out.set(table.subarray(tokens[n] * C, tokens[n] * C + C), n * C);
}

export function embeddingBackward(
  dtable: Float32Array,
  dout: Float32Array,
  tokens: ArrayLike<number>,
  N: number,
  C: number,
): void {
  for (let n = 0; n < N; n++) {
    const o = tokens[n] * C;
    for (let c = 0; c < C; c++) dtable[o + c] += dout[n * C + c];
  }
}
