/**
 * What an agent run's producer and evaluation need besides the sampler (`AgentRuntime`): the `env`
 * section's environment factory, the tool-call format of `generate.format`, the tools the environment
 * offers (listed once from a probe episode), and token I/O that never re-encodes sampled turns: the
 * prompt is rendered once per tree, observations are encoded piece by piece and appended as ids. With
 * `engine.chatTemplate` the format must render the model's own chat template: its prompt ids for a
 * probe question with the run's tools must equal the template's (qwen3 renders Qwen3's exactly), else
 * the config is refused naming the format that does, or saying none does.
 * Environments log under the run directory (`<run dir>/logs/mcp.stderr.log`: MCP servers' stderr and
 * restarts); commands without one (`eval`, `config --check`) use `<os tmpdir>/arbor-logs/`. An error
 * while opening closes what was opened: no server process outlives a failed start.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { loadTokenizer } from '../engine/tokenizer/load.js';
import type { ChatTool, TextTokenizer } from '../engine/types.js';
import { envFactoryFromConfig, isGatewayAgent } from '../env/index.js';
import { encodePieces, FORMAT_NAMES, formatFromName, qwen3ToolEntry, type FormatName } from '../env/format/index.js';
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
  /** The run's tokenizer when it is loaded already (producers): `engine.chatTemplate` is checked against it. */
  tokenizer?: TextTokenizer;
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
  // the template's tokenizer is loaded before any server starts: a wrong setting fails at once
  const template = config.engine.chatTemplate ? (options.tokenizer ?? templateTokenizer(config)) : undefined;
  const mcp = { logDir: options.logDir ?? runLogDir(config), log: options.log };
  const factory = await envFactoryFromConfig(config.env, { baseDir: process.cwd(), mcp });
  try {
    const probe = await factory.create();
    try {
      const tools = probe.tools;
      const format = template ? templateFormat(config, template, tools) : formatFromName(generate.format);
      return { factory, format, tools };
    } finally {
      await probe.close();
    }
  } catch (error) {
    await factory.close();
    throw error;
  }
}

/** A question the chat-template check renders both ways (any text does: the template and format wrap it). */
const PROBE = 'What is 17 + 25?';

/**
 * The tokenizer whose chat template `engine.chatTemplate` names, loaded from the config's directories
 * (a remote engine's `engine.tokenizer`; else `model.checkpoint`, `model.hf`, or `model.create.tokenizer`
 * while the model is still to be made).
 */
function templateTokenizer(config: ArborConfig): TextTokenizer {
  const { engine, model } = config;
  const dirs = engine.kind === 'remote' ? [engine.tokenizer] : [model.checkpoint, model.hf, model.create?.tokenizer];
  const dir = dirs.find((d): d is string => !!d && existsSync(join(d, 'tokenizer.json')));
  const tokenizer: TextTokenizer | undefined = dir ? loadTokenizer(dir) : undefined;
  if (!tokenizer?.encodeChat) {
    const where = engine.kind === 'remote' ? 'engine.tokenizer' : 'model.hf';
    const why = `renders prompts with a Hugging Face tokenizer's chat template: give one (${where})`;
    throw new ConfigError(`engine.chatTemplate: ${why}`, 'engine.chatTemplate');
  }
  return tokenizer;
}

/** The format options `engine.chatTemplateKwargs` sets (qwen3: `enable_thinking`); another key is refused. */
function formatOptions(name: FormatName, kwargs: Record<string, unknown>): { enableThinking?: boolean } {
  const known = name === 'qwen3' ? ['enable_thinking'] : [];
  for (const [key, value] of Object.entries(kwargs)) {
    if (!known.includes(key) || typeof value !== 'boolean') {
      const takes = known.length ? `takes ${known.map((k) => `${k} (true or false)`).join(', ')}` : 'takes none';
      const why = `agent prompts are rendered by generate.format ${name}, which ${takes}`;
      throw new ConfigError(`engine.chatTemplateKwargs.${key}: ${why}`, `engine.chatTemplateKwargs.${key}`);
    }
  }
  return name === 'qwen3' && kwargs.enable_thinking !== undefined ? { enableThinking: !!kwargs.enable_thinking } : {};
}

/**
 * `generate.format` when it renders the model's chat template exactly (a probe prompt with the run's
 * tools gives the same ids both ways), else a ConfigError naming the format that does, or saying none does.
 */
function templateFormat(config: ArborConfig, tokenizer: TextTokenizer, tools: ToolSpec[]): ToolCallFormat {
  const kwargs = config.engine.chatTemplateKwargs;
  const chatTools = tools.map((t) => qwen3ToolEntry(t) as unknown as ChatTool);
  const wanted = tokenizer.encodeChat!([{ role: 'user', content: PROBE }], {
    tools: chatTools.length ? chatTools : undefined,
    addGenerationPrompt: true,
    kwargs,
  });
  const bos = tokenizer.bos !== undefined ? [tokenizer.bos] : [];
  const renders = (name: FormatName): boolean => {
    // the probe reads enable_thinking as given; the format chosen checks every key (formatOptions)
    const enableThinking = typeof kwargs.enable_thinking === 'boolean' ? kwargs.enable_thinking : undefined;
    const format = formatFromName(name, name === 'qwen3' ? { enableThinking } : {});
    const ids = [...bos, ...tokenizer.encode(format.renderPrompt(PROBE, tools))];
    return ids.length === wanted.length && ids.every((id, i) => id === wanted[i]);
  };
  const name = (config.generate as { format: FormatName }).format;
  const matching = FORMAT_NAMES.filter(renders);
  if (matching.includes(name)) return formatFromName(name, formatOptions(name, kwargs));
  const template = "engine.chatTemplate: true renders agent prompts as the model's chat template";
  if (matching.length) {
    const why = `${template}, which generate.format ${matching[0]} renders token for token (${name} does not)`;
    throw new ConfigError(`generate.format: ${why}: set generate.format: ${matching[0]}`, 'generate.format');
  }
  const why =
    `${template}, and no tool-call format renders this one (${FORMAT_NAMES.join(', ')}; qwen3 is Qwen3's template). ` +
    'Set engine.chatTemplate: false (prompts are then rendered by generate.format), or run your own agent ' +
    'through the gateway (env.kind: agent), which serves any chat template';
  throw new ConfigError(`engine.chatTemplate: ${why}`, 'engine.chatTemplate');
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
  const env = await openAgentEnv(config, { tokenizer, ...options });
  return env && agentRuntime(env, tokenizer, config);
}
