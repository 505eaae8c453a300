/**
 * Rounding real shares to integers with a fixed total (largest-remainder / Hamilton apportionment):
 * every share gets its floor, then the units left go to the largest fractional parts, earlier
 * indices first on ties. Used wherever a budget is split by weights (TreePO's branch allocation,
 * DARS's budget scaling).
 */
export function largestRemainder(exact: number[], total: number): number[] {
  const out = exact.map((v) => Math.floor(v));
  let left = total - out.reduce((a, c) => a + c, 0);
  const order = exact.map((v, i) => [v - Math.floor(v), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    out[i]++;
    left--;
  }
  return out;
}
