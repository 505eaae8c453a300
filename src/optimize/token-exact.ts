/**
 * The multi-turn exactness check: for every trajectory of the given trees, the datum the
 * learner trains on must hold the root's tokens followed by every node's tokens in path order (sampled
 * turns and observations, nothing re-encoded), its loss weight must be non-zero exactly on the tokens
 * the policy sampled (mask 1), and the trainer's log-probs of those tokens must equal the sampler's
 * recorded ones within `tolerance`. Peers' most reported multi-turn bugs break one of the three
 * (retokenised history, dropped separators, masks longer than the completion).
 */
import { leaves, ownerLeaf, pathTo, trainsOnce, trajectory, type RolloutTree } from '../core/tree.js';
import type { Trainer } from '../engine/types.js';
import { buildDatums } from './datums.js';

export interface TokenExactReport {
  trajectories: number;
  /** Policy tokens compared. */
  sampledTokens: number;
  /** Trajectories whose datum tokens differ from the path's tokens. */
  tokenMismatches: number;
  /** Trajectories whose loss weights are non-zero anywhere but on the sampled tokens (or zero on one). */
  maskMismatches: number;
  /** Largest |trainer log-prob − sampler log-prob| over the sampled tokens. */
  maxLogprobDiff: number;
  /** 1 when every check passed. */
  exact: 0 | 1;
}

export async function tokenExactReport(
  trees: RolloutTree[],
  trainer: Pick<Trainer, 'logprobs'>,
  tolerance = 1e-5,
): Promise<TokenExactReport> {
  const report: TokenExactReport = {
    trajectories: 0,
    sampledTokens: 0,
    tokenMismatches: 0,
    maskMismatches: 0,
    maxLogprobDiff: 0,
    exact: 1,
  };
  for (const tree of trees) {
    const items = leaves(tree)
      .map((l) => ({ trajectory: trajectory(tree, l.id), advantage: 1, excluded: false }))
      .filter((a) => a.trajectory.tokens.length > 0);
    const datums = buildDatums(items, { aggregation: 'token_mean', maxResponseTokens: 1 });
    const current = datums.length ? await trainer.logprobs(datums) : [];
    items.forEach((item, i) => {
      const d = datums[i];
      const leafId = item.trajectory.leafId;
      const path = pathTo(tree, leafId);
      const expected = path.flatMap((n) => n.tokens);
      // a trainOnce tree (agent gateway) trains a shared node's sampled tokens on its owner leaf's path only
      const trains = (id: string) => !trainsOnce(tree) || ownerLeaf(tree, id).id === leafId;
      const sampled = path.flatMap((n, k) =>
        n.tokens.map((_, t) => (k > 0 && n.mask[t] === 1 && trains(n.id) ? n.logprobs[t] : undefined)),
      );
      const got = [...d.inputTokens, d.targetTokens[d.targetTokens.length - 1]];
      report.trajectories++;
      if (got.length !== expected.length || got.some((t, j) => t !== expected[j])) report.tokenMismatches++;
      let maskOk = true;
      for (let j = 1; j < expected.length; j++) {
        const trained = d.weights[j - 1] > 0;
        if (trained !== (sampled[j] !== undefined)) maskOk = false;
        if (sampled[j] === undefined) continue;
        report.sampledTokens++;
        report.maxLogprobDiff = Math.max(report.maxLogprobDiff, Math.abs(current[i][j - 1] - sampled[j]!));
      }
      if (!maskOk) report.maskMismatches++;
    });
  }
  report.exact =
    report.tokenMismatches === 0 &&
    report.maskMismatches === 0 &&
    report.maxLogprobDiff <= tolerance &&
    report.sampledTokens > 0
      ? 1
      : 0;
  return report;
}
