/**
 * Warm-start demonstrations for an agent trained through the gateway (`env.kind: agent`): the
 * conversation the agent would have (its messages and tools, OpenAI format) as one SFT sequence whose
 * token ids are exactly those the gateway gives the policy. At call k the gateway renders the messages
 * before assistant turn k with the chat template and its generation prompt and encodes the whole text
 * (P_k); the turn's target is what follows P_k in the next call's prompt P_k+1 up to and including the
 * end token (or, for the last turn, in the rendered whole conversation). So a model that writes its
 * turns as the template renders them makes every call extend the previous one (one chain, no fork).
 * A template that rewrites earlier turns (P_k+1 not extending P_k) is refused, naming the turn.
 */
import { DataError } from '../core/errors.js';
import type { SftExample } from '../engine/build.js';
import type { ChatMessage, ChatTool, TextTokenizer } from '../engine/types.js';
import { chatMessages, chatTools } from '../serve/vllm/params.js';

import type { AgentTranscript } from '../tasks/types.js';

export type { AgentTranscript };

/** One conversation as an SFT example in token ids (mask 1 on each assistant turn and its end token). */
export function chatTranscriptExample(
  tokenizer: TextTokenizer,
  transcript: AgentTranscript,
  source: string,
  kwargs?: Record<string, unknown>,
): SftExample {
  const fail = (field: string, why: string): never => {
    throw new DataError(`${source}: ${field}: ${why}`, undefined, undefined, field);
  };
  if (!tokenizer.applyChatTemplate) return fail('messages', "the model's tokenizer has no chat template");
  let messages: ChatMessage[];
  let tools: ChatTool[] | undefined;
  try {
    messages = chatMessages(transcript?.messages);
    tools = chatTools(transcript?.tools);
  } catch (error) {
    return fail('messages', (error as Error).message);
  }
  const turns = messages.flatMap((m, i) => (m.role === 'assistant' ? [i] : []));
  if (!turns.length || turns[0] === 0) fail('messages', 'needs a prompt message and at least one assistant message');
  const render = (upTo: number, generation: boolean): number[] =>
    tokenizer.encode(
      tokenizer.applyChatTemplate!(messages.slice(0, upTo), { tools, addGenerationPrompt: generation, kwargs }),
    );
  const ends = new Set(tokenizer.eosIds ?? [tokenizer.eos]);
  const whole = render(messages.length, false);
  const first = render(turns[0], true);
  const mask = new Array<number>(whole.length - first.length).fill(0);
  let trainedTo = first.length;
  for (const [k, at] of turns.entries()) {
    const prompt = k === 0 ? first : render(at, true);
    const next = k + 1 < turns.length ? render(turns[k + 1], true) : whole;
    if (!startsWith(next, prompt) || !startsWith(whole, prompt))
      fail(`messages[${at}]`, 'the chat template renders earlier turns differently later on (not append-only)');
    const end = next.slice(prompt.length).findIndex((id) => ends.has(id));
    if (end < 0) fail(`messages[${at}]`, 'the rendered assistant turn has no end token');
    for (let t = prompt.length; t <= prompt.length + end; t++) mask[t - first.length] = 1;
    trainedTo = prompt.length + end + 1;
  }
  // what follows the last end token (a separator) teaches nothing: cut it
  const cut = trainedTo - first.length;
  return {
    prompt: '',
    completion: '',
    source,
    ids: { prompt: first, completion: whole.slice(first.length, trainedTo), mask: mask.slice(0, cut) },
  };
}

function startsWith(ids: number[], prefix: number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}
