/**
 * A user task module for the public-API tests, written against `arbor` only: "n+1=" for n in 0..99,
 * options checked by its own schema (`offset` shifts the numbers), a plain score function as its
 * verifier, and a transcript per item (the answer, no calls) for warm starts.
 */
import { defineTask, z } from 'arbor';

export default defineTask(
  z.object({ offset: z.number().int().min(0).max(1000).default(0) }).strict(),
  ({ offset }) => ({
    name: 'count',
    makeItems(split, count, seed) {
      const items = [];
      for (let n = 0; n < 100 && items.length < count; n++) {
        if ((n % 5 === 0) !== (split === 'test')) continue;
        const k = ((n + seed) % 100) + offset;
        items.push({ id: `n${k}`, prompt: `${k}+1=`, answer: String(k + 1) });
      }
      return items;
    },
    reward: ({ response, item }) => (response.trim() === item.answer ? 1 : 0),
    demonstration: (item) => item.answer,
  }),
);
