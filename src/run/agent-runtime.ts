/**
 * What an agent run's producer and evaluation need besides the sampler (`AgentRuntime`): the `env`
 * section's environment factory, the tool-call format of `generate.format`, the tools the environment
 * offers (listed once from a probe episode), and token I/O that never re-encodes sampled turns: the
 * prompt is rendered once per tree, observations are encoded piece by piece and appended as ids.
 * Environments log under the run directory (`<run dir>/logs/mcp.stderr.log`: MCP servers' stderr and
 * restarts); commands without one (`eval`, `config --check`) use `<os tmpdir>/arbor-logs/`. An error
 * while opening closes what was opened: no server process outlives a failed start.
 */
import { dirname, join } from 'node:path';
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import type { TextTokenizer } from '../engine/types.js';
import { envFactoryFromConfig, isGatewayAgent } from '../env/index.js';
import { encodePieces, formatFromName } from '../env/format/index.js';
import { mcpStderrLogFile } from '../env/mcp.js';
import type { AgentRuntime } from '../generate/types.js';
import type { EnvironmentFactory, ToolCallFormat, ToolSpec } from '../env/types.js';
import type { ArborConfig } from './config.js';
import { stopTokens } from './prompts.js';

/** The environment side of an agent run: its factory, the tool-call format and the tools offered. */
export interface AgentEnv {
  factory: EnvironmentFactory;
  format: ToolCallFormat;
  tools: ToolSpec[];
}

/** Where an agent run's environment writes its logs and reports its server restarts. */
export interface AgentEnvOptions {
  /**
   * Directory of the environment's logs (`mcp.stderr.log`). Default: the run directory's `logs/`
   * (`runLogDir(config)`); commands without a run directory pass `scratchLogDir()`.
   */
  logDir?: string;
  /** One line per server exit or restart (default: Arbor's stderr). */
  log?: (line: string) => void;
}

/** `<run dir>/logs`: the run directory is `run.outDir`, else `runs/<run.name>` (as `train` opens it). */
export function runLogDir(config: ArborConfig): string {
  return join(config.run.outDir ?? join('runs', config.run.name), 'logs');
}

/** The log directory of commands that have no run directory (`eval`, `config --check`): `<os tmpdir>/arbor-logs`. */
export function scratchLogDir(): string {
  return dirname(mcpStderrLogFile());
}

/**
 * Open the `env` section of an agent run (undefined for a single-turn run; an `env` section without
 * `generate.kind: agent` is an error). The factory is closed on every error path: no server is left.
 */
export async function openAgentEnv(config: ArborConfig, options: AgentEnvOptions = {}): Promise<AgentEnv | undefined> {
  // the user's own agent runs through the gateway (run/gateway-runtime.ts), not in a tool environment
  if (isGatewayAgent(config.env)) return undefined;
  const generate = config.generate;
  if (generate.kind !== 'agent') {
    if (config.env)
      throw new ConfigError(`env: environments are used by generate.kind "agent" (got "${generate.kind}")`, 'env');
    return undefined;
  }
  if (!config.env) {
    throw new ConfigError(
      'generate.kind "agent" needs an environment: add an `env` section (e.g. env: { kind: calculator })',
      'env',
    );
  }
  if (config.engine.chatTemplate) {
    const message = 'engine.chatTemplate: agent runs render prompts with generate.format (set chatTemplate: false)';
    throw new ConfigError(message, 'engine.chatTemplate');
  }
  const mcp = { logDir: options.logDir ?? runLogDir(config), log: options.log };
  const factory = await envFactoryFromConfig(config.env, { baseDir: process.cwd(), mcp });
  try {
    const format = formatFromName(generate.format);
    const probe = await factory.create();
    try {
      return { factory, format, tools: probe.tools };
    } finally {
      await probe.close();
    }
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
  const stops = new Set(stopTokens(tokenizer));
  return {
    ...env,
    contextLength: config.engine.kind === 'embedded' ? config.model.contextLength : undefined,
    encodePrompt: (item: TaskItem, initialObservation: string) => {
      const prompt = initialObservation ? `${item.prompt}\n${initialObservation}` : item.prompt;
      return [
        ...(tokenizer.bos !== undefined ? [tokenizer.bos] : []),
        ...tokenizer.encode(format.renderPrompt(prompt, tools)),
      ];
    },
    // separators with special-token parsing, tool output without (a tool cannot forge <|im_end|>)
    encodePieces: (pieces) =>
      encodePieces(pieces, (text, special) =>
        special || !tokenizer.encodePlain ? tokenizer.encode(text) : tokenizer.encodePlain(text),
      ),
    // the stop token that ended a turn is not its text (kept, the char tokenizer's "<eos>" would end a qwen3 answer)
    decodeTurn: (tokens) => decode(stops.has(tokens[tokens.length - 1]) ? tokens.slice(0, -1) : tokens, keepSpecial),
  };
}

/** `openAgentEnv` then `agentRuntime` (producers: each opens its own environments). */
export async function agentRuntimeFor(
  config: ArborConfig,
  tokenizer: TextTokenizer,
  options: AgentEnvOptions = {},
): Promise<AgentRuntime | undefined> {
  const env = await openAgentEnv(config, options);
  return env && agentRuntime(env, tokenizer, config);
}
