/**
 * Test data for SAPO rollout sharing (src/run/share.ts): a character tokenizer (id = char code, EOS 0),
 * own trees built from response texts, a policy whose log-prob of token x is −x/1000, and a reward
 * that pays a fixed `paid` for the gold answer. Asserts nothing.
 */
import { addNode, createTree, ROOT_ID, type RolloutTree } from '../src/core/tree.js';
import type { TaskItem } from '../src/core/types.js';
import type { Datum } from '../src/engine/types.js';
import type { RewardFunction } from '../src/filter/types.js';
import { shareOptionsSchema, Share, type ShareOptions } from '../src/run/share.js';

export const charTokenizer = {
  eos: 0,
  encode: (text: string) => [...text].map((c) => c.charCodeAt(0)),
  decode: (ids: number[]) => String.fromCharCode(...ids.filter((i) => i !== 0)),
};

export const item = (n: number): TaskItem => ({ id: `q${n}`, prompt: `${n}+1=`, answer: String(n + 1) });

/** A group for item(n): responses `texts`, each ended by EOS (finish 'stop'). */
export function ownTree(n: number, texts: string[], id = `own/${n}`): RolloutTree {
  const tree = createTree(id, item(n).id, charTokenizer.encode(item(n).prompt));
  for (const t of texts)
    addNode(tree, ROOT_ID, { tokens: [...charTokenizer.encode(t), 0], finishReason: 'stop', weightVersion: 1 });
  return tree;
}

/** Log-prob of target token x under the fake policy: −x/1000. */
export const fakeLogprobs = async (data: Datum[]): Promise<number[][]> =>
  data.map((d) => d.targetTokens.map((x) => -x / 1000));

/** 1/0 reward on the gold answer, scaled by `paid` (so a test can tell whose reward scored a leaf). */
export const goldReward = (paid: number): RewardFunction => ({
  name: 'correct',
  score: async ({ response, item: it }) => {
    const reward = response.trim() === it.answer ? paid : 0;
    return { reward, components: { correct: reward }, info: {} };
  },
});

export function shareFor(dir: string, learner: string, overrides: Partial<ShareOptions> = {}, paid = 1): Share {
  const options = shareOptionsSchema.parse({ dir, learner, ...overrides });
  return new Share(options, {
    tokenizer: charTokenizer,
    encodePrompt: (it) => charTokenizer.encode(it.prompt),
    logprobs: fakeLogprobs,
    reward: goldReward(paid),
    seed: 5,
    maxResponseTokens: 16,
    rewardOptions: { concurrency: 4, timeoutMs: 5000, failureReward: 0 },
  });
}
