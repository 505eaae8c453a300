/**
 * What the agent gateway records of one episode of a user's agent (serve/gateway.ts writes it;
 * generate/episode-tree.ts turns the G episodes of one prompt into one RolloutTree). Every call keeps
 * the prompt ids the engine was given and the ids it sampled with their log-probs, so a trajectory is
 * assembled from ids alone: nothing sampled is ever decoded and re-encoded. Plain JSON data; this module
 * holds types and one helper, no behaviour.
 */

/** Engine accounting of one call (engine/types.ts SampleUsage, repeated here: core imports nothing). */
export interface EpisodeUsage {
  promptTokensComputed: number;
  prefixTokensReused: number;
  tokensDecoded: number;
}

/** A tool call the gateway returned to the agent (OpenAI `tool_calls[i].function`). */
export interface EpisodeToolCall {
  name: string;
  /** The JSON text of the arguments object, exactly as sent to the client. */
  arguments: string;
}

/** One continuation of a call (a call with `n > 1` has several). */
export interface EpisodeChoice {
  /** Sampled ids, including the stop token that ended the continuation; shape [T]. */
  tokens: number[];
  /** Sampling log-prob of each token; shape [T]. */
  logprobs: number[];
  /** stop: a stop token or string; length: max_tokens or the context; abort: the client went away mid-stream. */
  finishReason: 'stop' | 'length' | 'abort';
  /** The message returned to the client for this choice (chat: role, content, tool_calls), as sent. */
  message?: Record<string, unknown>;
  /** Tool calls parsed out of the text and returned as `tool_calls`. */
  toolCalls: EpisodeToolCall[];
  /** The text held tool-call markup that did not parse: it went back as content (counted as tool_parse_failures). */
  toolParseFailed: boolean;
}

/** One `/v1/chat/completions` or `/v1/completions` request the gateway answered for an episode. */
export interface EpisodeCall {
  /** Arrival order within the episode (0-based). */
  index: number;
  route: 'chat' | 'completions';
  /** The prompt ids the engine was given: the rendered chat template (with tools) and any forced tool-call prefix. */
  promptIds: number[];
  choices: EpisodeChoice[];
  /** Weight version that sampled this call. */
  weightVersion: number;
  /** The request's messages (chat requests) as the template saw them: tool-call arguments parsed, null content "". */
  messages?: Array<Record<string, unknown>>;
  /** The client's retry count (`x-stainless-retry-count`); 0 = a first attempt. */
  retry: number;
  /** When the call arrived (ms since the episode started) and how long it took. */
  startedMs: number;
  wallMs: number;
  usage: EpisodeUsage;
}

/** One episode: what the agent returned and every call it made. */
export interface EpisodeRecord {
  /** Unique within the run (`<tree id>/e<k>`). */
  episodeId: string;
  calls: EpisodeCall[];
  /** The agent's final answer (absent when the episode failed). */
  response?: string;
  /** What the agent returned besides its answer (`{ response, info }`). */
  info?: Record<string, unknown>;
  /** Why the episode failed (the agent threw, ran past its time, or never called the gateway): an error node. */
  error?: string;
  wallMs: number;
}

/** The prompt ids followed by the sampled ids of choice `j` of `call` (what a later call may extend). */
export function callSequence(call: EpisodeCall, j: number): number[] {
  return call.promptIds.concat(call.choices[j].tokens);
}
