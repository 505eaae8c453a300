/**
 * The example's training reward (a reward part of `kind: module`): 1 when the final answer is the
 * item's code, minus `toolCost` per tool call. Its options are checked by its own zod schema, so a
 * typo in the config's `options` is an error naming the key.
 */
import { defineReward, z } from 'arbor';

export default defineReward(
  z.object({ toolCost: z.number().min(0).max(1).default(0).describe('reward subtracted per tool call') }).strict(),
  ({ toolCost }) =>
    defineReward('code', ({ response, item, episode }) => {
      const correct = response.trim() === item.answer ? 1 : 0;
      const calls = episode?.toolCalls ?? 0;
      return { reward: correct - toolCost * calls, components: { correct, toolCost: -toolCost * calls } };
    }),
);
