/**
 * Test-time RL (TTRL, arXiv 2504.16084; PRIME-RL/TTRL verl/utils/reward_score/ttrl/ttt_metrics.py):
 * for items without gold answers, the group's majority answer is the pseudo-label and a response
 * earns 1 when it verifies against it. The reference code takes the most frequent extracted answer
 * (ties: first seen); here answers are grouped by the task verifier's own equivalence, as the issue
 * asks: every distinct extracted answer collects the votes of the responses that verify against it
 * ("1/2" and "0.5" are one answer under the math verifier), and the first answer with the most votes
 * wins. Responses with no extractable answer vote for nothing.
 */
import type { ScoreInput, RewardFunction } from './types.js';
import { isCorrect } from './constants.js';

export interface GroupLabel {
  /** The pseudo-label (undefined: no response had an answer). */
  label: string | undefined;
  /** Responses that verify against it. */
  votes: number;
  /** Responses with an extractable answer. */
  answered: number;
}

/** The majority answer of a group of responses by the verifier's equivalence (ties: first seen). */
export async function majorityLabel(
  responses: string[],
  extract: (response: string) => string | null,
  verify: (response: string, answer: string) => Promise<boolean>,
): Promise<GroupLabel> {
  const answers = responses.map(extract);
  const candidates = [...new Set(answers.filter((a): a is string => a !== null))];
  let best: GroupLabel = { label: undefined, votes: 0, answered: answers.filter((a) => a !== null).length };
  for (const candidate of candidates) {
    let votes = 0;
    for (let i = 0; i < responses.length; i++)
      if (answers[i] !== null && (answers[i] === candidate || (await verify(responses[i], candidate)))) votes++;
    if (votes > best.votes) best = { ...best, label: candidate, votes };
  }
  return best;
}

/**
 * The `majority_vote` reward part: `prepareGroup` labels each group (one tree's leaves) with its
 * majority answer in `item.answer` (gold answers, if any, are ignored: `meta.goldAnswer` keeps them
 * for reports), and `score` is the task verifier against that label, logged as `majority_vote`.
 */
export function majorityVoteReward(
  taskReward: RewardFunction,
  extract: (response: string) => string | null,
): RewardFunction {
  const verify = async (input: ScoreInput, answer: string) =>
    isCorrect((await taskReward.score({ ...input, item: { ...input.item, answer } })).reward);
  return {
    name: 'majority_vote',
    async prepareGroup(inputs) {
      const group = await majorityLabel(
        inputs.map((i) => i.response),
        extract,
        (response, answer) => verify({ ...inputs[0], response }, answer),
      );
      return inputs.map((input) => ({
        ...input,
        item: {
          ...input.item,
          answer: group.label ?? '',
          meta: {
            ...input.item.meta,
            goldAnswer: input.item.answer,
            pseudoLabel: group.label ?? null,
            votes: group.votes,
            answered: group.answered,
          },
        },
      }));
    },
    async score(input, context) {
      const label = input.item.meta?.pseudoLabel;
      if (typeof label !== 'string')
        return { reward: 0, components: { majority_vote: 0 }, info: { pseudoLabel: null } };
      const r = await taskReward.score(input, context);
      const reward = isCorrect(r.reward) ? 1 : 0;
      return {
        reward,
        components: { majority_vote: reward },
        info: { pseudoLabel: label, votes: input.item.meta?.votes },
      };
    },
  };
}
