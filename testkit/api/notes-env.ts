/**
 * A user environment module for the public-API tests: `defineEnvironment` over two tools with
 * per-episode state (a notebook of key → value, empty at reset, cloned on fork) and a state-valued
 * reward (1 once the item's answer is written under "answer"). `maxValue` bounds what `note` accepts.
 */
import { defineEnvironment, tool, z } from 'arbor';

type Notebook = Map<string, string>;

export default defineEnvironment(
  z.object({ maxValue: z.number().int().min(1).default(1000) }).strict(),
  ({ maxValue }) => ({
    tools: {
      note: tool({
        description: 'write a value',
        inputSchema: z.object({ key: z.string(), value: z.number().int().max(maxValue) }),
        execute: ({ key, value }, { state }: { state: Notebook }) => {
          state.set(key, String(value));
          return 'ok';
        },
      }),
      read: tool({
        description: 'read a value',
        inputSchema: z.object({ key: z.string() }),
        execute: ({ key }, { state }: { state: Notebook }) => state.get(key) ?? 'none',
      }),
    },
    state: { init: () => new Map<string, string>(), clone: (s: Notebook) => new Map(s) },
    reward: ({ state, item }: { state: Notebook; item: { answer: string } }) =>
      state.get('answer') === item.answer ? 1 : 0,
  }),
);
