/** Reward/value colours: red (low) → amber → green (high) over a domain, grey when unknown. */
export function colourScale(values: Array<number | undefined>): (v: number | undefined) => string {
  const finite = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  let lo = Math.min(0, ...finite);
  let hi = Math.max(1, ...finite);
  if (hi - lo < 1e-9) [lo, hi] = [lo - 0.5, hi + 0.5];
  return (v) => {
    if (v === undefined || !Number.isFinite(v)) return '#d1d5db';
    const t = Math.min(1, Math.max(0, (v - lo) / (hi - lo)));
    const [r, g, b] =
      t < 0.5 ? mix([220, 38, 38], [234, 179, 8], t * 2) : mix([234, 179, 8], [22, 163, 74], (t - 0.5) * 2);
    return `rgb(${r},${g},${b})`;
  };
}

function mix(a: number[], b: number[], t: number): number[] {
  return a.map((x, i) => Math.round(x + (b[i] - x) * t));
}
