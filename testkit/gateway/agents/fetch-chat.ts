/**
 * An agent with no client library: one `fetch` of the gateway's /v1/chat/completions per episode, the
 * reply's content as its answer. Episodes named in `failing` throw instead (an error node that the run
 * logs, counts and goes on from); every context it was handed is kept in `seen` for the tests.
 */
import { defineAgent, type AgentContext } from 'arbor';

/** What the tests read back: each episode's context, and the episode ids that are made to fail. */
export const probe: { seen: AgentContext[]; failing: Set<string> } = { seen: [], failing: new Set() };

export default defineAgent(async (item, ctx) => {
  probe.seen.push(ctx);
  if (probe.failing.has(ctx.episodeId)) throw new Error(`scripted failure of ${ctx.episodeId}`);
  const res = await fetch(`${ctx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: ctx.model, messages: [{ role: 'user', content: item.prompt }], max_tokens: 6 }),
    signal: ctx.signal,
  });
  if (!res.ok) throw new Error(`the gateway answered ${res.status}: ${await res.text()}`);
  const body = (await res.json()) as { choices: Array<{ message: { content: string | null } }> };
  return body.choices[0].message.content ?? '';
});
