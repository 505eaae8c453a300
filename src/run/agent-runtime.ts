/**
 * What an agent run's producer and evaluation need besides the sampler (`AgentRuntime`): the `env`
 * section's environment factory, the tool-call format of `generate.format`, the tools the environment
 * offers (listed once from a probe episode), and token I/O that never re-encodes sampled turns: the
 * prompt is rendered once per tree, observations are encoded piece by piece and appended as ids.
 */
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import type { TextTokenizer } from '../engine/types.js';
import { envFactoryFromConfig } from '../env/index.js';
import { encodePieces, formatFromName } from '../env/format/index.js';
import type { AgentRuntime } from '../generate/types.js';
import type { EnvironmentFactory, ToolCallFormat, ToolSpec } from '../env/types.js';
import type { ArborConfig } from './config.js';

/** The environment side of an agent run: its factory, the tool-call format and the tools offered. */
export interface AgentEnv {
  factory: EnvironmentFactory;
  format: ToolCallFormat;
  tools: ToolSpec[];
}

/** Open the `env` section of an agent run (undefined for a single-turn run; an `env` section without `generate.kind: agent` is an error). */
export async function openAgentEnv(config: ArborConfig): Promise<AgentEnv | undefined> {
  const generate = config.generate;
  if (generate.kind !== 'agent') {
    if (config.env) throw new ConfigError(`env: environments are used by generate.kind "agent" (got "${generate.kind}")`, 'env');
    return undefined;
  }
  if (!config.env) throw new ConfigError('generate.kind "agent" needs an environment: add an `env` section (e.g. env: { kind: calculator })', 'env');
  if (config.engine.chatTemplate) throw new ConfigError('engine.chatTemplate: agent runs render prompts with generate.format (set chatTemplate: false)', 'engine.chatTemplate');
  const factory = await envFactoryFromConfig(config.env, { baseDir: process.cwd() });
  const format = formatFromName(generate.format);
  try {
    const probe = await factory.create();
    const tools = probe.tools;
    await probe.close();
    return { factory, format, tools };
  } catch (error) {
    await factory.close();
    throw error;
  }
}

/** Token I/O of an agent run over an opened environment. */
export function agentRuntime(env: AgentEnv, tokenizer: TextTokenizer, config: ArborConfig): AgentRuntime {
  const { format, tools } = env;
  // the embedded char tokenizer decodes specials as names (<eos>): the arbor format reads turns without them
  const keepSpecial = format.name !== 'arbor';
  const decode = tokenizer.decode.bind(tokenizer) as (ids: number[], keepSpecial?: boolean) => string;
  return {
    ...env,
    contextLength: config.engine.kind === 'embedded' ? config.model.contextLength : undefined,
    encodePrompt: (item: TaskItem, initialObservation: string) => {
      const prompt = initialObservation ? `${item.prompt}\n${initialObservation}` : item.prompt;
      return [...(tokenizer.bos !== undefined ? [tokenizer.bos] : []), ...tokenizer.encode(format.renderPrompt(prompt, tools))];
    },
    // separators with special-token parsing, tool output without (a tool cannot forge <|im_end|>)
    encodePieces: (pieces) => encodePieces(pieces, (text, special) => (special || !tokenizer.encodePlain ? tokenizer.encode(text) : tokenizer.encodePlain(text))),
    decodeTurn: (tokens) => decode(tokens, keepSpecial),
  };
}

/** `openAgentEnv` then `agentRuntime` (producers: each opens its own environments). */
export async function agentRuntimeFor(config: ArborConfig, tokenizer: TextTokenizer): Promise<AgentRuntime | undefined> {
  const env = await openAgentEnv(config);
  return env && agentRuntime(env, tokenizer, config);
}
