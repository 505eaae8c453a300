/**
 * Fabricated bench/out/replay.json contents for the merge-rule tests: the variants' figures, curves,
 * export round trip, settings and per-run provenance a `npm run bench -- replay` writes, with made-up
 * numbers. No bench runs; the figures mean nothing beyond identifying where they came from.
 */
import type { Provenance } from '../../bench/util.js';

export const COMMIT_A = 'a'.repeat(40);
export const COMMIT_B = 'b'.repeat(40);
export const SETTINGS = { seeds: 3, steps: 40, gain: 0.25, config: { run: { seed: 0 } } };

/** A provenance as bench/util.ts's `provenance` returns it, at `commit` (clean unless `diff`). */
export function fakeProvenance(commit: string | null, diff: string | null = null): Provenance {
  return {
    commit,
    dirty: commit === null ? null : diff !== null,
    dirty_files: diff ? ['src/run/loop.ts'] : [],
    diff,
    node: 'v20.0.0',
    date: '2026-11-27T10:00:00.000Z',
    bench: 'replay',
    args: [],
  };
}

/** A replay.json whose every variant (and the export) ran at `commit` (clean unless `diff`), on `date`. */
export function replayJson(
  commit: string,
  options: { diff?: string; variants?: string[]; settings?: unknown; date?: string } = {},
): Record<string, any> {
  const variants = options.variants ?? ['sequential', 'sequential-8', 'replay-dots'];
  const run = { commit, dirty: options.diff !== undefined, diff: options.diff ?? null, date: options.date ?? 'then' };
  return {
    name: 'replay',
    commit,
    dirty: run.dirty,
    headline: { replay_tokens_to_target_gain: 1.5 },
    settings: options.settings ?? SETTINGS,
    variants: Object.fromEntries(variants.map((n, i) => [n, { seeds_ok: 3, tokens_to_target: 1000 * (i + 1) }])),
    curves: Object.fromEntries(variants.map((n) => [n, [{ seed: 0, byTokens: [[0, 0.5]], bySeconds: [[0, 0.5]] }]])),
    export: { ok: true, rows: 7, detail: 'fabricated' },
    runs: Object.fromEntries([...variants, 'export'].map((n) => [n, run])),
  };
}
