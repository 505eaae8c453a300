/**
 * Axis ticks shared by the dashboard, report.html and the SVG charts of the benches: "nice" tick
 * positions (1, 2, 2.5, 5 × 10^k) and labels with just enough decimals that distinct ticks never
 * print alike (today's report printed 0.95, 0.95, 0.95 for a narrow range).
 */

/** About `count` evenly spaced round values covering [min, max]. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  if (min > max) [min, max] = [max, min];
  const raw = (max - min) / Math.max(1, count - 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step)
    out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

function scaled(v: number, big: number): [number, string] {
  if (big >= 1e9) return [v / 1e9, 'G'];
  if (big >= 1e6) return [v / 1e6, 'M'];
  if (big >= 1e4) return [v / 1e3, 'k'];
  return [v, ''];
}

/** Labels for tick values: shared unit suffix, the fewest decimals (≤ 8) that keep distinct values distinct. */
export function formatTicks(values: number[]): string[] {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return values.map(() => '');
  const big = Math.max(...finite.map(Math.abs));
  const distinct = new Set(finite).size;
  if (big > 0 && big < 1e-3) return exponential(values, distinct);
  const sorted = [...new Set(finite)].sort((a, b) => a - b);
  const gap = sorted.length > 1 ? Math.min(...sorted.slice(1).map((v, i) => v - sorted[i])) : Math.abs(sorted[0]) || 1;
  for (let d = 0; d <= 8; d++) {
    let exact = true;
    const labels = values.map((v) => {
      if (!Number.isFinite(v)) return '';
      const [x, unit] = scaled(v, big);
      const text = x.toFixed(d);
      if (Math.abs(Number(text) * (v / (x || 1)) - v) > gap * 1e-3 && x !== 0) exact = false;
      return `${text}${unit}`;
    });
    if (exact && new Set(labels.filter((l) => l)).size === distinct)
      return labels.map((l) => (/^-0(\.0*)?[a-zA-Z]*$/.test(l) ? l.slice(1) : l));
  }
  return values.map((v) => (Number.isFinite(v) ? v.toPrecision(6) : ''));
}

function exponential(values: number[], distinct: number): string[] {
  for (let d = 0; d <= 6; d++) {
    const labels = values.map((v) => (!Number.isFinite(v) ? '' : v === 0 ? '0' : v.toExponential(d)));
    if (new Set(labels.filter((l) => l)).size === distinct) return labels;
  }
  return values.map((v) => (Number.isFinite(v) ? v.toExponential(6) : ''));
}

/** One value for a legend or tooltip: 4 significant digits, k/M suffixes for large numbers. */
export function formatValue(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toPrecision(4)}M`;
  if (a >= 1e4) return `${(v / 1e3).toPrecision(4)}k`;
  if (Number.isInteger(v)) return String(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e4)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}
