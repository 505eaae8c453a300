/**
 * What the agent gateway (serve/gateway.ts) adds to `arbor serve`'s chat and completions routes: the
 * run's sampling policy in place of the request's own, and a record of every answered call (the prompt
 * ids the engine was given, and per choice the ids it sampled with their log-probs and the message sent
 * back). `arbor serve` itself passes no hooks.
 */
import type { EpisodeChoice } from '../core/episode.js';
import type { ChatMessage, SampleUsage } from '../engine/types.js';
import type { SamplingFields } from './vllm/params.js';

/** One answered call, as the gateway records it (core/episode.ts EpisodeCall without the episode's bookkeeping). */
export interface AnsweredCall {
  route: 'chat' | 'completions';
  promptIds: number[];
  choices: EpisodeChoice[];
  usage: SampleUsage;
  weightVersion: number;
  /** The request's messages (chat). */
  messages?: ChatMessage[];
}

export interface CallHooks {
  /** The sampling a request gets (the run's temperature, top_p, top_k and seed replace the request's; max tokens capped). */
  policy(sampling: SamplingFields, maxTokens: number): { sampling: SamplingFields; maxTokens: number };
  /** Called once per answered prompt, also when the client left mid-stream (finish `abort`, what was sampled). */
  record(call: AnsweredCall): void;
}
