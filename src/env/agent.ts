/**
 * Your own agent as the environment (`env: { kind: agent, module, concurrency, timeoutSeconds }`): a
 * module whose default export is `defineAgent(async (item, ctx) => answer)`. The agent is unchanged
 * agent code (the Vercel AI SDK, the openai client, LangChain.js, ...) pointed at the run's
 * OpenAI-compatible gateway (serve/gateway.ts); its tools run in the agent, not here. This module
 * holds the agent's types, the `env` section's options and the loader; run/gateway-runtime.ts runs it.
 */
import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { importUserModule, moduleExport } from '../core/modules.js';
import { TOOL_CALL_PARSERS } from '../serve/tool-calls.js';

/** What the user's agent receives for one episode: where the policy is served and the episode's own key. */
export interface AgentContext {
  /** The run's OpenAI-compatible endpoint (`http://127.0.0.1:PORT/v1`): give it to your client as its base URL. */
  baseURL: string;
  /** This episode's API key: every call made with it belongs to this episode (a finished episode's key gets 401). */
  apiKey: string;
  /** A model name to request (the gateway serves the policy under any name). */
  model: string;
  /** Aborted when the episode runs past `env.timeoutSeconds` or the run stops: pass it to your client's calls. */
  signal: AbortSignal;
  /** This episode's id (unique in the run), for your logs. */
  episodeId: string;
}

/** What an agent returns: its final answer (what the reward reads), or the answer with notes for the logs. */
export type AgentResult = string | { response: string; info?: Record<string, unknown> };

/** One episode of your agent on a task item (unchanged agent code, pointed at `ctx.baseURL`). */
export type AgentFunction = (item: TaskItem, ctx: AgentContext) => AgentResult | Promise<AgentResult>;

/** An agent as a module default-exports it (`env: { kind: agent, module }`). */
export interface AgentDefinition {
  readonly kind: 'arbor.agent';
  readonly run: AgentFunction;
}

export const agentEnvOptions = z
  .object({
    kind: z
      .literal('agent')
      .describe(
        "your own agent (AI SDK, openai client, LangChain.js, ...): a module whose default export is defineAgent(...), run against the run's OpenAI-compatible gateway",
      ),
    module: z.string().min(1).describe('the agent module (path relative to the config file)'),
    concurrency: z.number().int().min(1).max(4096).default(64).describe('episodes running at once'),
    timeoutSeconds: z
      .number()
      .min(0.01)
      .max(86_400)
      .default(120)
      .describe(
        'time limit of one episode: past it the episode is an error node, its key revoked and its calls cancelled',
      ),
    toolCallParser: z
      .enum(TOOL_CALL_PARSERS)
      .default('hermes')
      .describe(
        "the model's tool-call format: hermes (Qwen2/Qwen3/Hermes <tool_call> JSON) or llama3_json (Llama 3.1)",
      ),
  })
  .strict();
export type AgentEnvOptions = z.infer<typeof agentEnvOptions>;

/** The agent function a module default-exports (a defineAgent(...), or a plain function); a ConfigError names the file otherwise. */
export async function loadAgent(module: string, baseDir: string): Promise<AgentFunction> {
  const file = isAbsolute(module) ? module : resolve(baseDir, module);
  const mod = await importUserModule(file, 'env.module');
  const value = moduleExport(mod, 'agent', file, 'env.module');
  if (typeof value === 'function') return value as AgentFunction;
  const run = (value as Partial<AgentDefinition> | null)?.run;
  if (typeof run === 'function') return run;
  throw new ConfigError(
    `env.module: ${file}'s default export is not an agent: export default defineAgent(async (item, ctx) => answer)`,
    'env.module',
    file,
  );
}
