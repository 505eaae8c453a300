/**
 * The `arbor ui` single-page app: #/ (run list), #/run/<name>/<charts|trees|config>[/<step>],
 * #/compare/<a>,<b>,... Live: server-sent events name the runs that changed, and the open view
 * re-reads only those (metrics incrementally).
 */
import type { RunInfo } from '../types.js';
import { api, watchRuns } from './api.js';
import { CompareView } from './compare-view.js';
import { h } from './dom.js';
import { runList } from './run-list.js';
import { RunView } from './run-view.js';

interface View {
  el: HTMLElement;
  refresh(changed: string[]): Promise<void> | void;
  destroy?(): void;
}

const selected = new Set<string>();

function listView(): View {
  const el = h('div', {});
  const refresh = async () => {
    let runs: RunInfo[];
    try {
      runs = await api.runs();
    } catch (e) {
      el.replaceChildren(h('p', { class: 'error' }, (e as Error).message));
      return;
    }
    for (const n of [...selected]) if (!runs.some((r) => r.name === n)) selected.delete(n);
    el.replaceChildren(
      runList(runs, selected, () => (location.hash = `#/compare/${[...selected].map(encodeURIComponent).join(',')}`)),
    );
  };
  void refresh();
  return { el, refresh };
}

function route(hash: string): View {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'run' && parts[1]) {
    const tab = parts[2] === 'trees' || parts[2] === 'config' ? parts[2] : 'charts';
    const v = new RunView(parts[1], tab, parts[3] !== undefined ? Number(parts[3]) : undefined);
    return {
      el: v.el,
      refresh: (changed) => (changed.length === 0 || changed.includes(v.name) ? v.refresh() : undefined),
      destroy: () => v.destroy(),
    };
  }
  if (parts[0] === 'compare' && parts[1]) {
    const v = new CompareView(parts[1].split(',').filter(Boolean));
    return {
      el: v.el,
      refresh: (changed) =>
        changed.length === 0 || changed.some((n) => v.names.includes(n)) ? v.refresh() : undefined,
      destroy: () => v.destroy(),
    };
  }
  return listView();
}

function main(): void {
  const root = document.getElementById('app')!;
  const header = h(
    'header',
    {},
    h('a', { href: '#/', class: 'brand' }, 'Arbor'),
    h('span', { class: 'muted' }, ' runs dashboard'),
    h('span', { class: 'live muted', id: 'live' }, ''),
  );
  const main = h('main', {});
  root.replaceChildren(header, main);
  let view: View = route(location.hash);
  main.append(view.el);
  window.addEventListener('hashchange', () => {
    view.destroy?.();
    view = route(location.hash);
    main.replaceChildren(view.el);
  });
  watchRuns((changed) => {
    document.getElementById('live')!.textContent = ` · live, last change ${new Date().toLocaleTimeString()}`;
    void view.refresh(changed);
  });
}

main();
