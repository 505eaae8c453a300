/**
 * Mini-batches for several optimiser updates per step: split advantaged trajectories into `parts`
 * groups without splitting a tree (a group's advantages are relative to each other), trees dealt
 * round-robin in batch order so the split is deterministic.
 */
import type { AdvantagedTrajectory } from './types.js';

export function splitByTree(items: AdvantagedTrajectory[], parts: number): AdvantagedTrajectory[][] {
  const byTree = new Map<string, AdvantagedTrajectory[]>();
  for (const a of items) {
    const list = byTree.get(a.trajectory.treeId) ?? [];
    list.push(a);
    byTree.set(a.trajectory.treeId, list);
  }
  const groups = [...byTree.values()];
  const n = Math.min(parts, groups.length) || 1;
  const out: AdvantagedTrajectory[][] = Array.from({ length: n }, () => []);
  groups.forEach((g, i) => out[i % n].push(...g));
  return out;
}
