/** The run list: status, task, generator, headline numbers; tick runs to compare them. */
import type { RunInfo } from '../types.js';
import { h } from './dom.js';
import { formatValue } from './ticks.js';

const pct = (v: number | undefined) => (v === undefined ? '–' : `${(v * 100).toFixed(1)}%`);

function ago(ms: number): string {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 86400 * 2) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toISOString().slice(0, 10);
}

export function runList(runs: RunInfo[], selected: Set<string>, onCompare: () => void): HTMLElement {
  const button = h(
    'button',
    { type: 'button', class: 'compare-button', disabled: selected.size < 2, onclick: onCompare },
    `Compare selected (${selected.size})`,
  );
  const row = (r: RunInfo) => {
    const box = h('input', {
      type: 'checkbox',
      class: 'pick',
      checked: selected.has(r.name),
      'aria-label': `select ${r.name}`,
    });
    box.addEventListener('change', () => {
      if (box.checked) selected.add(r.name);
      else selected.delete(r.name);
      button.textContent = `Compare selected (${selected.size})`;
      button.disabled = selected.size < 2;
    });
    const hl = r.headline;
    return h(
      'tr',
      { class: 'run-row', 'data-run': r.name },
      h('td', {}, box),
      h('td', {}, h('a', { href: `#/run/${encodeURIComponent(r.name)}`, class: 'run-link' }, r.name)),
      h('td', {}, h('span', { class: `status status-${r.status}` }, r.status)),
      h('td', {}, r.task),
      h('td', {}, `${r.generator}${r.mode === 'async' ? ' (async)' : ''}`),
      h('td', { class: 'num' }, `${r.lastStep} / ${r.steps}`),
      h('td', { class: 'num' }, formatValue(hl.reward)),
      h('td', { class: 'num' }, `${pct(hl.heldoutStart)} → ${pct(hl.heldoutEnd)}`),
      h('td', { class: 'num' }, pct(hl.passAtK)),
      h('td', { class: 'num' }, formatValue(hl.tokens)),
      h('td', { class: 'num' }, hl.wallS === undefined ? '–' : `${formatValue(hl.wallS)} s`),
      h('td', { class: 'muted' }, ago(r.updatedAt)),
    );
  };
  const head = [
    '',
    'run',
    'status',
    'task',
    'generator',
    'step',
    'reward',
    'held-out greedy',
    'pass@k',
    'tokens decoded',
    'wall',
    'updated',
  ];
  return h(
    'section',
    { class: 'run-list' },
    h('div', { class: 'controls' }, button, h('span', { class: 'muted' }, `${runs.length} runs`)),
    runs.length
      ? h(
          'table',
          { class: 'runs' },
          h('thead', {}, h('tr', {}, ...head.map((c) => h('th', {}, c)))),
          h('tbody', {}, ...runs.map(row)),
        )
      : h('p', { class: 'muted' }, 'No runs in this directory yet (a run directory has a config.resolved.yaml).'),
  );
}
