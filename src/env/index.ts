/**
 * The agent layer: tool-call formats, TypeScript tools, tool environments and the built-in
 * environments, plus `envOptionsSchema` / `envFactoryFromConfig` for the config's `env` section
 * (`tools` and `module` load a user module: core/modules.ts).
 *
 * Environment kinds are entries of ENV_KINDS (a zod object schema with a `kind` literal, and a
 * builder): adding a kind is one line there.
 */
import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { applyOptions, checkShape, importUserModule, moduleExport } from '../core/modules.js';
import { calculatorEnvironmentFactory, calculatorEnvOptions } from './builtin/calculator.js';
import { codeEnvironmentFactory, codeEnvOptions } from './builtin/code.js';
import { kvEnvironmentFactory, kvEnvOptions } from './builtin/kv.js';
import { toolEnvironmentFactory, type EpisodeState } from './tool-env.js';
import { asArborTool, type ArborTool } from './tools.js';
import { toolNameProblem } from './format/names.js';
import type { EnvironmentFactory } from './types.js';
import { mcpEnvironmentFactory, mcpOptionsSchema, type McpRuntime } from './mcp.js';
import { openenvEnvironmentFactory, openenvOptionsSchema } from './openenv.js';
import { agentEnvOptions, type AgentEnvOptions } from './agent.js';

export type * from './types.js';
export { agentEnvOptions, loadAgent, type AgentEnvOptions } from './agent.js';
export type { AgentContext, AgentDefinition, AgentFunction, AgentResult } from './agent.js';
export * from './format/index.js';
export * from './tools.js';
export * from './tool-env.js';
export { calculate, calcTool, calculatorEnvironmentFactory, calculatorEnvOptions } from './builtin/calculator.js';
export { codeTool, codeEnvironmentFactory, codeEnvOptions, type CodeEnvOptions } from './builtin/code.js';
export {
  kvTools,
  kvEnvironmentFactory,
  kvEnvOptions,
  kvMeta,
  kvGoalHolds,
  kvGoalValue,
  applyOp,
  type KvGoal,
  type KvOp,
  type KvState,
} from './builtin/kv.js';

export const toolsEnvOptions = z
  .object({
    kind: z.literal('tools'),
    module: z
      .string()
      .min(1)
      .describe(
        'module exporting tools made with tool() (path relative to the config file): a `tools` export object ' +
          '(or a default export object of tools), else every export that is a tool, named after the export',
      ),
    maxObservationChars: z
      .number()
      .int()
      .min(16)
      .max(1_000_000)
      .default(2000)
      .describe('longest tool output passed back'),
  })
  .strict();

export const moduleEnvOptions = z
  .object({
    kind: z
      .literal('module')
      .describe('your own environment: a module whose default export is a defineEnvironment(...)'),
    module: z.string().min(1).describe('the module (path relative to the config file)'),
    options: z.record(z.unknown()).default({}).describe("the environment's options (checked by its own schema)"),
  })
  .strict();

export interface EnvBuildContext {
  /** Directory that relative module paths resolve against (configs arrive with absolute ones: run/config.ts). */
  baseDir: string;
  /** Where MCP servers' stderr logs go and how their restarts are reported (env/mcp.ts McpRuntime). */
  mcp?: McpRuntime;
}

type EnvKind<S extends z.AnyZodObject> = {
  schema: S;
  build: (options: z.infer<S>, context: EnvBuildContext) => EnvironmentFactory | Promise<EnvironmentFactory>;
};

function envKind<S extends z.AnyZodObject>(schema: S, build: EnvKind<S>['build']): EnvKind<z.AnyZodObject> {
  return { schema, build } as EnvKind<z.AnyZodObject>;
}

/** Every environment kind; the union below and the factory are built from this list. */
export const ENV_KINDS: EnvKind<z.AnyZodObject>[] = [
  envKind(calculatorEnvOptions, (o) => calculatorEnvironmentFactory(o)),
  envKind(kvEnvOptions, (o) => kvEnvironmentFactory(o)),
  envKind(codeEnvOptions, (o) => codeEnvironmentFactory(o)),
  envKind(toolsEnvOptions, (o, context) => loadToolsEnvironment(o, context)),
  envKind(moduleEnvOptions, (o, context) => loadModuleEnvironment(o, context)),
  envKind(mcpOptionsSchema, (o, context) => mcpEnvironmentFactory(o, context.mcp)),
  envKind(openenvOptionsSchema, (o) => openenvEnvironmentFactory(o)),
];

type Members = [z.ZodDiscriminatedUnionOption<'kind'>, ...z.ZodDiscriminatedUnionOption<'kind'>[]];

/** The `env` section: a discriminated union over `kind` (the tool environments, and `agent`: your own agent through the gateway). */
export const envOptionsSchema = z.discriminatedUnion('kind', [
  ...ENV_KINDS.map((k) => k.schema),
  agentEnvOptions,
] as unknown as Members);

export type EnvOptions = { kind: string } & Record<string, unknown>;

export function knownEnvKinds(): string[] {
  return [...ENV_KINDS.map((k) => (k.schema.shape.kind as z.ZodLiteral<string>).value), 'agent'];
}

/** The `env` section runs the user's own agent through the gateway (env/agent.ts), not a tool environment. */
export function isGatewayAgent(env: unknown): env is AgentEnvOptions {
  return (env as { kind?: unknown } | null | undefined)?.kind === 'agent';
}

/** Why `value` (something with an `execute`) is not a tool: its schema is missing or not zod. */
function notATool(value: object): string {
  const v = value as { inputSchema?: unknown; parameters?: unknown };
  const schema = v.inputSchema ?? v.parameters;
  if (schema === undefined) return 'it has execute() but no inputSchema';
  const json = schema && typeof schema === 'object' && ('jsonSchema' in schema || 'type' in schema);
  return json
    ? "its inputSchema is a JSON schema (e.g. the AI SDK's jsonSchema()); tools here take zod schemas (z.object(...))"
    : 'its inputSchema is not a zod schema (no safeParse)';
}

/** Where a module's tools are: its `tools` export, else a default export that is a plain object, else the module. */
function toolSource(
  mod: Record<string, unknown>,
  where: string,
): { entries: Record<string, unknown>; explicit: string } {
  for (const name of ['tools', 'default']) {
    const value = mod[name];
    if (Array.isArray(value))
      throw new ConfigError(
        `env.module: ${where} exports ${name === 'tools' ? '"tools"' : 'by default'} an array; tools are named by ` +
          'their keys: export an object, e.g. { lookup: tool({...}), add: tool({...}) }',
        'env.module',
      );
    // a defineEnvironment(...) or another function is not a tools object
    if (value && typeof value === 'object' && !asArborTool(value) && !('execute' in value))
      return { entries: value as Record<string, unknown>, explicit: name === 'tools' ? 'tools.' : 'default.' };
    if (name === 'default' && typeof value === 'function')
      throw new ConfigError(
        `env.module: ${where}'s default export is a function (a defineEnvironment(...)?): use env.kind: module for ` +
          'an environment; env.kind: tools takes a module of tools',
        'env.module',
      );
  }
  return { entries: mod, explicit: '' };
}

/**
 * Tools of a module: its `tools` export object (or a default export object), else every export that is
 * a tool, named after its key. Nothing is dropped silently: in a tools object every entry must be a tool,
 * and anywhere a value with `execute()` whose schema is not zod is an error naming it; other exports
 * (helpers, constants) are left alone. Names must be tool names every format can call.
 */
export function toolsOfModule(
  mod: Record<string, unknown>,
  where: string,
): { tools: Record<string, ArborTool>; state?: EpisodeState<unknown> } {
  const { entries, explicit } = toolSource(mod, where);
  const tools: Record<string, ArborTool> = {};
  for (const [name, value] of Object.entries(entries)) {
    const t = asArborTool(value);
    const looksLikeTool = !!value && typeof value === 'object' && 'execute' in value;
    if (!t && !explicit && !looksLikeTool) continue;
    const field = `${explicit}${name}`;
    if (!t) {
      const why = looksLikeTool ? notATool(value as object) : 'not a tool (make it with tool({...}))';
      throw new ConfigError(`env.module: ${where}: "${field}": ${why}`, 'env.module');
    }
    const problem = toolNameProblem(name);
    if (problem) throw new ConfigError(`env.module: ${where}: "${field}": ${problem}`, 'env.module');
    tools[name] = t;
  }
  if (!Object.keys(tools).length) {
    const has = Object.keys(mod).join(', ') || 'nothing';
    throw new ConfigError(
      `env.module: ${where} exports no tools (objects with a zod inputSchema and an execute function; it exports ${has})`,
      'env.module',
    );
  }
  const state = mod.state as EpisodeState<unknown> | undefined;
  if (state !== undefined && (typeof state.init !== 'function' || typeof state.clone !== 'function')) {
    throw new ConfigError(
      `env.module: ${where} exports "state" without init(item) and clone(state) functions`,
      'env.module',
    );
  }
  return { tools, state };
}

async function loadToolsEnvironment(
  options: z.infer<typeof toolsEnvOptions>,
  context: EnvBuildContext,
): Promise<EnvironmentFactory> {
  const file = isAbsolute(options.module) ? options.module : resolve(context.baseDir, options.module);
  const mod = await importUserModule(file, 'env.module');
  const { tools, state } = toolsOfModule(mod, file);
  return toolEnvironmentFactory({ kind: 'tools', tools, state, maxObservationChars: options.maxObservationChars });
}

/** A module's environment: its default export (or `environment`), a defineEnvironment(...) or an EnvironmentFactory. */
async function loadModuleEnvironment(
  options: z.infer<typeof moduleEnvOptions>,
  context: EnvBuildContext,
): Promise<EnvironmentFactory> {
  const file = isAbsolute(options.module) ? options.module : resolve(context.baseDir, options.module);
  const mod = await importUserModule(file, 'env.module');
  const factory = applyOptions(
    moduleExport(mod, 'environment', file, 'env.module'),
    options.options,
    file,
    'env.options',
  );
  checkShape(factory, 'environment (defineEnvironment)', file, 'env.module', [
    ['create', (f) => typeof f.create === 'function'],
    ['close', (f) => typeof f.close === 'function'],
  ]);
  const f = factory as EnvironmentFactory;
  return { kind: typeof f.kind === 'string' ? f.kind : 'module', create: () => f.create(), close: () => f.close() };
}

/** The environment factory an `env` config section describes (ConfigError naming the bad key). */
export async function envFactoryFromConfig(spec: unknown, context: EnvBuildContext): Promise<EnvironmentFactory> {
  const kind = (spec as { kind?: unknown } | null)?.kind;
  if (kind === 'agent')
    throw new ConfigError(
      'env.kind "agent" is your own agent, run through the gateway: it is not a tool environment',
      'env.kind',
    );
  const entry = ENV_KINDS.find((k) => (k.schema.shape.kind as z.ZodLiteral<string>).value === kind);
  if (!entry)
    throw new ConfigError(
      `env.kind: unknown environment kind ${JSON.stringify(kind)} (known: ${knownEnvKinds().join(', ')})`,
      'env.kind',
    );
  const parsed = entry.schema.safeParse(spec);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = ['env', ...issue.path, ...(issue.code === 'unrecognized_keys' ? issue.keys.slice(0, 1) : [])].join('.');
    throw new ConfigError(`${key}: ${issue.message}`, key);
  }
  return entry.build(parsed.data, context);
}
