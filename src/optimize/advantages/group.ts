/**
 * Flat group estimators over each prompt's leaves (rewards r_1..r_G; optimize.md):
 * grpo (r − mean)/(std + eps) with the unbiased std; dr_grpo r − mean; rloo r_i − mean_{j≠i} r_j;
 * mc_grpo r − median, where for odd G exactly one median pivot gets A = 0 and is excluded.
 * Groups of one get advantage 0.
 */

export function grpoAdvantages(rewards: number[], eps = 1e-6): number[] {
  const G = rewards.length;
  if (G < 2) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / G;
  const variance = rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (G - 1);
  return rewards.map((r) => (r - mean) / (Math.sqrt(variance) + eps));
}

export function drGrpoAdvantages(rewards: number[]): number[] {
  const G = rewards.length;
  const mean = rewards.reduce((a, b) => a + b, 0) / G;
  return rewards.map((r) => r - mean);
}

export function rlooAdvantages(rewards: number[]): number[] {
  const G = rewards.length;
  if (G < 2) return rewards.map(() => 0);
  const sum = rewards.reduce((a, b) => a + b, 0);
  return rewards.map((r) => r - (sum - r) / (G - 1));
}

/** Returns advantages and the index of the excluded pivot (−1 when G is even). */
export function mcGrpoAdvantages(rewards: number[]): { advantages: number[]; pivot: number } {
  const G = rewards.length;
  if (G < 2) return { advantages: rewards.map(() => 0), pivot: G === 1 ? 0 : -1 };
  const order = rewards.map((r, i) => [r, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let median: number;
  let pivot = -1;
  if (G % 2 === 1) {
    median = order[(G - 1) / 2][0];
    pivot = order[(G - 1) / 2][1];
  } else {
    median = (order[G / 2 - 1][0] + order[G / 2][0]) / 2;
  }
  return { advantages: rewards.map((r, i) => (i === pivot ? 0 : r - median)), pivot };
}
