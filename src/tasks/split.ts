/**
 * The deterministic train/test split every generated task draws from: items come from a seeded stream
 * (`Rng(seed).fork('<task>/<split>')`); an item whose key hashes to bucket 0 of 5 is a test item, the
 * others are training items, so the splits are disjoint and a prompt never changes sides. Duplicates
 * are skipped; the draw gives up after 200 tries per item asked (a small space may give fewer).
 */
import { Rng, hashString } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import type { Split } from './types.js';

/** `count` distinct items of `split` for `seed`; `make` may return null or undefined to skip a draw. */
export function drawSplit(
  task: string,
  split: Split,
  count: number,
  seed: number,
  make: (rng: Rng) => TaskItem | null | undefined,
  key: (item: TaskItem) => string = (item) => item.prompt,
): TaskItem[] {
  const rng = new Rng(seed).fork(`${task}/${split}`);
  const out: TaskItem[] = [];
  const seen = new Set<string>();
  for (let tries = 0; out.length < count && tries < count * 200; tries++) {
    const item = make(rng);
    if (!item) continue;
    if ((hashString(key(item)) % 5 === 0) !== (split === 'test') || seen.has(item.id)) continue;
    seen.add(item.id);
    out.push(item);
  }
  return out;
}
