/**
 * A user reward module for the public-API tests: `defineReward` with an options schema. Scores 1 for
 * a response of at most `maxChars` characters; throws for items whose prompt contains `failOn` (when
 * set), so tests see user-code failures become the failure reward.
 */
import { defineReward, z } from 'arbor';

const options = z.object({ maxChars: z.number().int().min(1).default(4), failOn: z.string().optional() }).strict();

export default defineReward(options, ({ maxChars, failOn }) =>
  defineReward('short', ({ response, item }) => {
    if (failOn !== undefined && item.prompt.includes(failOn))
      throw new Error(`the prompt contains ${JSON.stringify(failOn)}`);
    return response.length <= maxChars ? 1 : 0;
  }),
);
