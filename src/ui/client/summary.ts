/** summary.json of one or more runs as a table: one row per key, one column per run. */
import { h } from './dom.js';
import { formatValue } from './ticks.js';

function cell(v: unknown): string {
  if (typeof v === 'number') return formatValue(v);
  if (v === null || v === undefined) return '–';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

export function summaryTable(runs: Array<{ name: string; summary: Record<string, unknown> | null }>): HTMLTableElement {
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.summary ?? {})))];
  return h(
    'table',
    { class: 'summary' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), ...runs.map((r) => h('th', {}, r.name)))),
    h(
      'tbody',
      {},
      ...keys.map((k) =>
        h('tr', {}, h('th', {}, k), ...runs.map((r) => h('td', { class: 'num' }, cell(r.summary?.[k])))),
      ),
    ),
  );
}
