/**
 * Exponential moving average with TensorBoard's debiasing: weight 0 = raw values, 0.99 = very smooth.
 * Missing values (null) stay missing and do not move the average.
 */
export function smooth(values: ReadonlyArray<number | null>, weight: number): Array<number | null> {
  const w = Math.min(Math.max(weight, 0), 0.999);
  if (w === 0) return values.slice();
  let avg = 0;
  let n = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return null;
    avg = avg * w + (1 - w) * v;
    n++;
    return avg / (1 - w ** n);
  });
}
