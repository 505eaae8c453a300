/**
 * One agent with every fault, chosen by the item's id, for the driver tests (test/run/gateway-agent.test.ts):
 * `answer` makes one call and answers; `throw` throws; `number` calls, then returns 42; `silent`
 * answers without calling; `hang` streams a call without its signal and never returns; `hang-abortable`
 * makes a call with `ctx.signal` and ends when it is aborted; `slow` waits, calls and answers, counting
 * the agents running at once. Everything it sees is kept in `probe` for the tests to read.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { defineAgent, type AgentContext } from 'arbor';

/** What the tests read back. */
export const probe = {
  /** Each episode's context by episode id. */
  contexts: new Map<string, AgentContext>(),
  /** Agents running now, and the most at once. */
  running: 0,
  maxRunning: 0,
  /** Episodes whose agent function has returned or thrown. */
  settled: new Set<string>(),
  /** Why an abortable agent stopped (the error its call rejected with). */
  aborted: new Map<string, string>(),
};

/** One chat call through the gateway with fetch; `stream` reads the SSE reply to its end. */
async function chat(ctx: AgentContext, prompt: string, options: { stream?: boolean; signal?: AbortSignal } = {}) {
  const res = await fetch(`${ctx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: ctx.model, messages: [{ role: 'user', content: prompt }], stream: options.stream }),
    signal: options.signal,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`the gateway answered ${res.status}: ${text}`);
  return options.stream
    ? text
    : ((JSON.parse(text) as { choices: Array<{ message: { content: string } }> }).choices[0].message.content ?? '');
}

async function run(id: string, prompt: string, ctx: AgentContext): Promise<unknown> {
  switch (id) {
    case 'answer':
      return chat(ctx, prompt);
    case 'throw':
      throw new Error('the tool server is down');
    case 'number':
      await chat(ctx, prompt);
      return 42;
    case 'silent':
      return 'an answer from nowhere';
    case 'hang':
      await chat(ctx, prompt, { stream: true });
      return new Promise(() => undefined);
    case 'hang-abortable':
      try {
        await chat(ctx, prompt, { signal: ctx.signal });
      } catch (error) {
        probe.aborted.set(ctx.episodeId, (error as Error).message);
        throw error;
      }
      return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    case 'slow': {
      probe.maxRunning = Math.max(probe.maxRunning, ++probe.running);
      try {
        await delay(50);
        return await chat(ctx, prompt);
      } finally {
        probe.running--;
      }
    }
    default:
      throw new Error(`faults agent: no behaviour "${id}"`);
  }
}

export default defineAgent(async (item, ctx) => {
  probe.contexts.set(ctx.episodeId, ctx);
  try {
    return (await run(item.id, item.prompt, ctx)) as string;
  } finally {
    probe.settled.add(ctx.episodeId);
  }
});
