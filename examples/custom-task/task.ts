/**
 * The example's task, written against Arbor's public API only: "code of abc?" asks for a name's
 * secret code, which only the `code` tool knows (tools.ts). Names are three random letters; a hash
 * puts one in five in the test split, so held-out names were never seen in training.
 * Demonstrations come from a lazy teacher: it looks the code up for a `demoToolRate` share of the
 * items and answers "?" for the others, so the warm-started model mostly answers "?"; RL against the
 * verifier must teach it to call the tool every time.
 */
import { defineTask, Rng, z, type TaskItem, type TranscriptMessage } from 'arbor';
import { secretCode } from './tools.js';

const options = z
  .object({
    demoToolRate: z.number().min(0).max(1).default(0.3).describe('share of demonstrations that call the tool'),
  })
  .strict();

const letters = 'abcdefghijklmnopqrstuvwxyz';

/** True for the names of the test split (a fixed fifth of all names). */
function isTest(name: string): boolean {
  return Number(secretCode(`split/${name}`)) % 5 === 0;
}

export default defineTask(options, ({ demoToolRate }) => ({
  name: 'secret-code',
  description: "a name's secret code, which only the code tool knows",
  makeItems(split, count, seed) {
    const rng = new Rng(seed).fork(`secret-code/${split}`);
    const items = new Map<string, TaskItem>();
    for (let tries = 0; items.size < count && tries < count * 100; tries++) {
      const name = Array.from({ length: 3 }, () => letters[rng.int(letters.length)]).join('');
      if (isTest(name) !== (split === 'test') || items.has(name)) continue;
      items.set(name, { id: name, prompt: `code of ${name}?`, answer: secretCode(name) });
    }
    return [...items.values()];
  },
  reward: ({ response, item }) => (response.trim() === item.answer ? 1 : 0),
  transcript(item): TranscriptMessage[] {
    const user: TranscriptMessage = { role: 'user', content: item.prompt };
    // the lazy teacher looks up a fixed share of the names (chosen by a hash, so items never change)
    if (new Rng(0).fork(`teacher/${item.id}`).next() >= demoToolRate)
      return [user, { role: 'assistant', content: '?' }];
    const call = {
      id: 'c1',
      type: 'function' as const,
      function: { name: 'code', arguments: JSON.stringify({ name: item.id }) },
    };
    return [
      user,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'c1', content: item.answer },
      { role: 'assistant', content: item.answer },
    ];
  },
}));
