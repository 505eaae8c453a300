/**
 * Runs the user's own agent (`env: { kind: agent, module, concurrency, timeoutSeconds }`) against the
 * run's agent gateway (serve/gateway.ts): one gateway per owner (the producer, held-out evaluation),
 * opened on a free loopback port over the owner's sampler and the model's chat template. Each episode
 * gets a fresh key and the run's sampling policy; at most `concurrency` episodes run at once.
 *
 * An episode ends when the agent returns. The agent's faults are data, never thrown: an agent that
 * throws, runs past `timeoutSeconds`, returns something that is not an answer, or never calls the
 * gateway gives a record with `error` (an error node: logged, counted, never trained on). A timed-out
 * episode's signal is aborted, its key revoked (later calls get 401) and its calls in flight cancelled.
 * `close()` stops the gateway (no port left open) and waits, bounded, for agents still running.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { ConfigError } from '../core/errors.js';
import { Semaphore } from '../core/semaphore.js';
import type { EpisodeRecord } from '../core/episode.js';
import type { TaskItem } from '../core/types.js';
import { HFTokenizer } from '../engine/tokenizer/hf.js';
import type { Sampler, TextTokenizer } from '../engine/types.js';
import { isGatewayAgent, loadAgent, type AgentContext, type AgentFunction, type AgentResult } from '../env/index.js';
import type { AgentDriver, EpisodeSpec } from '../generate/types.js';
import { hfServeTokenizer } from '../serve/engine.js';
import { AgentGateway, GATEWAY_MODEL } from '../serve/gateway.js';
import type { ServeTokenizer } from '../serve/text.js';
import type { ArborConfig } from './config.js';

/** How long `close()` waits for agents still running after their episode ended (ms). */
const SETTLE_MS = 2000;

/** The gateway and the agent of one owner. */
export interface GatewayAgent extends AgentDriver {
  readonly gateway: AgentGateway;
  /** Episodes whose agent had not settled when close() gave up waiting. */
  readonly unsettled: number;
  close(): Promise<void>;
}

export interface GatewayAgentOptions {
  /** One line per failed episode (rate-limited); default Arbor's stderr. */
  log?: (line: string) => void;
}

/** The gateway's view of the run's tokenizer: it must have a chat template (a Hugging Face model's). */
export function chatTokenizer(tokenizer: TextTokenizer): ServeTokenizer {
  if (tokenizer instanceof HFTokenizer && tokenizer.hasChatTemplate) return hfServeTokenizer(tokenizer);
  const why =
    'env.kind "agent" serves the policy through its chat template: use a Hugging Face model with one ' +
    '(model.hf, or engine.tokenizer for a remote engine)';
  throw new ConfigError(`env: ${why}`, 'model.hf');
}

/** Check an agent run's config: `env.kind: agent` needs `generate.kind: agent` with i.i.d. episodes. */
export function checkGatewayConfig(config: ArborConfig): void {
  if (config.generate.kind !== 'agent')
    throw new ConfigError(
      `env.kind "agent" runs G episodes of your agent per prompt: set generate: { kind: agent, groupSize } ` +
        `(got generate.kind "${config.generate.kind}")`,
      'generate.kind',
    );
  if (config.generate.branching !== 'iid')
    throw new ConfigError(
      `generate.branching: the agent gateway runs G independent episodes per prompt (iid); "${config.generate.branching}" ` +
        'branches inside episodes, which needs a tool environment Arbor drives',
      'generate.branching',
    );
}

/** Open the gateway agent of a config (undefined unless `env.kind` is agent). */
export async function openGatewayAgent(
  config: ArborConfig,
  sampler: Sampler,
  tokenizer: TextTokenizer,
  options: GatewayAgentOptions = {},
): Promise<GatewayAgent | undefined> {
  const env = config.env;
  if (!isGatewayAgent(env)) return undefined;
  checkGatewayConfig(config);
  const agent = await loadAgent(env.module, process.cwd());
  const gateway = new AgentGateway({
    sampler,
    tokenizer: chatTokenizer(tokenizer),
    eosIds: [...(tokenizer.eosIds ?? [tokenizer.eos])],
    toolCallParser: env.toolCallParser,
    limits: config.engine.kind === 'embedded' ? { contextLength: config.model.contextLength } : {},
  });
  const baseURL = await gateway.listen();
  const log = rateLimited(options.log ?? ((line) => console.error(line)));
  const slots = new Semaphore(env.concurrency);
  const running = new Set<Promise<unknown>>();
  let unsettled = 0;
  const run = (item: TaskItem, spec: EpisodeSpec) =>
    runEpisode(agent, gateway, baseURL, item, spec, env.timeoutSeconds * 1000, running);
  return {
    gateway,
    get unsettled() {
      return unsettled;
    },
    async runEpisode(item, spec) {
      await slots.acquire();
      try {
        const record = await run(item, spec);
        if (record.error) log(`agent episode ${record.episodeId}: ${record.error}`);
        return record;
      } finally {
        slots.release();
      }
    },
    async close() {
      await gateway.close();
      const settled = Promise.allSettled([...running]).then(() => 'settled' as const);
      if ((await Promise.race([settled, delay(SETTLE_MS, 'waiting' as const)])) === 'waiting') unsettled = running.size;
    },
  };
}

/** One episode of `agent` on `item` through the gateway; the agent's faults come back in `error`. */
async function runEpisode(
  agent: AgentFunction,
  gateway: AgentGateway,
  baseURL: string,
  item: TaskItem,
  spec: EpisodeSpec,
  timeoutMs: number,
  running: Set<Promise<unknown>>,
): Promise<EpisodeRecord> {
  const started = Date.now();
  const policy = { temperature: spec.temperature, topP: spec.topP, topK: spec.topK, maxTokens: spec.maxTokens };
  const episode = gateway.open(spec.episodeId, { ...policy, seed: spec.seed });
  const controller = new AbortController();
  const stop = () => controller.abort(spec.signal?.reason);
  // a run that stopped while this episode waited for its slot: the agent starts with its signal aborted
  if (spec.signal?.aborted) stop();
  else spec.signal?.addEventListener('abort', stop, { once: true });
  const ctx: AgentContext = {
    baseURL,
    apiKey: episode.apiKey,
    model: GATEWAY_MODEL,
    signal: controller.signal,
    episodeId: spec.episodeId,
  };
  // the agent's own promise: it may outlive the episode (a timeout), so it is tracked until it settles
  const outcome = Promise.resolve()
    .then(() => agent(structuredClone(item), ctx))
    .then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
  running.add(outcome);
  void outcome.finally(() => running.delete(outcome));
  const timer = new AbortController();
  const ended = await Promise.race([outcome, delay(timeoutMs, 'timeout' as const, { signal: timer.signal })]);
  timer.abort();
  if (ended === 'timeout') controller.abort(new Error('the episode ran past env.timeoutSeconds'));
  spec.signal?.removeEventListener('abort', stop);
  let calls = await episode.close();
  const answer = ended === 'timeout' ? undefined : ended;
  let error =
    ended === 'timeout'
      ? `the agent ran past env.timeoutSeconds (${timeoutMs / 1000} s); its key was revoked and its calls cancelled`
      : 'error' in answer!
        ? `the agent threw: ${errorText(answer.error)}`
        : undefined;
  const result = answer && 'result' in answer ? answerOf(answer.result) : undefined;
  if (!error && result && 'error' in result) error = result.error;
  if (!error && !calls.length)
    error = 'the agent never called the gateway (point its client at ctx.baseURL with ctx.apiKey)';
  // calls the engine answered with non-finite log-probs cannot go into a tree: the episode is an error
  const fault = engineFault(calls);
  if (fault) [error, calls] = [error ?? fault, []];
  const ok = result && !('error' in result) ? result : undefined;
  return {
    episodeId: spec.episodeId,
    calls,
    ...(ok ? { response: ok.response, ...(ok.info ? { info: ok.info } : {}) } : {}),
    ...(error ? { error } : {}),
    wallMs: Date.now() - started,
  };
}

/** A call whose log-probs cannot be trained on (the engine returned a non-finite one): the episode is an error. */
function engineFault(calls: EpisodeRecord['calls']): string | undefined {
  for (const call of calls)
    for (const [j, c] of call.choices.entries()) {
      const t = c.logprobs.findIndex((x) => !Number.isFinite(x));
      if (t >= 0 || c.logprobs.length !== c.tokens.length)
        return `call ${call.index} choice ${j}: the engine returned log-prob ${c.logprobs[t]} for token ${t} of ${c.tokens.length}`;
    }
  return undefined;
}

/** The answer an agent returned, or why it is not one. */
function answerOf(result: AgentResult): { response: string; info?: Record<string, unknown> } | { error: string } {
  if (typeof result === 'string') return { response: result };
  const r = result as { response?: unknown; info?: unknown } | null;
  if (r && typeof r === 'object' && typeof r.response === 'string') {
    const info = r.info && typeof r.info === 'object' ? (r.info as Record<string, unknown>) : undefined;
    return { response: r.response, ...(info ? { info } : {}) };
  }
  const got = r === null ? 'null' : Array.isArray(r) ? 'an array' : typeof r;
  return { error: `the agent returned ${got}, not its answer (a string or { response, info })` };
}

function errorText(error: unknown): string {
  const text =
    error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/** At most 5 lines per 10 s, then one line saying how many were left out. */
function rateLimited(log: (line: string) => void): (line: string) => void {
  let windowStart = 0;
  let shown = 0;
  let dropped = 0;
  return (line) => {
    const now = Date.now();
    if (now - windowStart > 10_000) {
      if (dropped) log(`(${dropped} more agent episode errors not shown)`);
      windowStart = now;
      shown = 0;
      dropped = 0;
    }
    if (shown++ < 5) log(line);
    else dropped++;
  };
}
