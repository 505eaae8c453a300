/**
 * The agent layer: tool-call formats, TypeScript tools, tool environments and the built-in
 * environments, plus `envOptionsSchema` / `envFactoryFromConfig` for the config's `env` section.
 *
 * Environment kinds are entries of ENV_KINDS (a zod object schema with a `kind` literal, and a
 * builder): adding a kind is one line there.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { calculatorEnvironmentFactory, calculatorEnvOptions } from './builtin/calculator.js';
import { codeEnvironmentFactory, codeEnvOptions } from './builtin/code.js';
import { kvEnvironmentFactory, kvEnvOptions } from './builtin/kv.js';
import { toolEnvironmentFactory, type EpisodeState } from './tool-env.js';
import { asArborTool, type ArborTool } from './tools.js';
import type { EnvironmentFactory } from './types.js';
import { mcpEnvironmentFactory, mcpOptionsSchema } from './mcp.js';
import { openenvEnvironmentFactory, openenvOptionsSchema } from './openenv.js';

export type * from './types.js';
export * from './format/index.js';
export * from './tools.js';
export * from './tool-env.js';
export { calculate, calcTool, calculatorEnvironmentFactory, calculatorEnvOptions } from './builtin/calculator.js';
export { codeTool, codeEnvironmentFactory, codeEnvOptions, type CodeEnvOptions } from './builtin/code.js';
export { kvTools, kvEnvironmentFactory, kvEnvOptions, kvMeta, kvGoalHolds, kvGoalValue, applyOp, type KvGoal, type KvOp, type KvState } from './builtin/kv.js';

export const toolsEnvOptions = z
  .object({
    kind: z.literal('tools'),
    module: z.string().min(1).describe('module exporting tools made with tool() (a path relative to the working directory, like every path in the config); a `tools` export object, or every export that is a tool'),
    maxObservationChars: z.number().int().min(16).max(1_000_000).default(2000).describe('longest tool output passed back'),
  })
  .strict();

export interface EnvBuildContext {
  /** Directory that relative module paths resolve against (the working directory, as for every path in a config). */
  baseDir: string;
}

type EnvKind<S extends z.AnyZodObject> = { schema: S; build: (options: z.infer<S>, context: EnvBuildContext) => EnvironmentFactory | Promise<EnvironmentFactory> };

function envKind<S extends z.AnyZodObject>(schema: S, build: EnvKind<S>['build']): EnvKind<z.AnyZodObject> {
  return { schema, build } as EnvKind<z.AnyZodObject>;
}

/** Every environment kind; the union below and the factory are built from this list. */
export const ENV_KINDS: EnvKind<z.AnyZodObject>[] = [
  envKind(calculatorEnvOptions, (o) => calculatorEnvironmentFactory(o)),
  envKind(kvEnvOptions, (o) => kvEnvironmentFactory(o)),
  envKind(codeEnvOptions, (o) => codeEnvironmentFactory(o)),
  envKind(toolsEnvOptions, (o, context) => loadToolsEnvironment(o, context)),
  envKind(mcpOptionsSchema, (o) => mcpEnvironmentFactory(o)),
  envKind(openenvOptionsSchema, (o) => openenvEnvironmentFactory(o)),
];

type Members = [z.ZodDiscriminatedUnionOption<'kind'>, ...z.ZodDiscriminatedUnionOption<'kind'>[]];

/** The `env` section: a discriminated union over `kind`. */
export const envOptionsSchema = z.discriminatedUnion('kind', ENV_KINDS.map((k) => k.schema) as unknown as Members);

export type EnvOptions = { kind: string } & Record<string, unknown>;

export function knownEnvKinds(): string[] {
  return ENV_KINDS.map((k) => (k.schema.shape.kind as z.ZodLiteral<string>).value);
}

/** Tools of a module: its `tools` export object, else every export that is a tool (named after the export). */
export function toolsOfModule(mod: Record<string, unknown>, where: string): { tools: Record<string, ArborTool>; state?: EpisodeState<unknown> } {
  const source = mod.tools && typeof mod.tools === 'object' ? (mod.tools as Record<string, unknown>) : mod;
  const tools: Record<string, ArborTool> = {};
  for (const [name, value] of Object.entries(source)) {
    const t = asArborTool(value);
    if (t) tools[name] = t;
  }
  if (!Object.keys(tools).length) throw new ConfigError(`env.module: ${where} exports no tools (objects with a zod inputSchema and an execute function)`, 'env.module');
  const state = mod.state as EpisodeState<unknown> | undefined;
  if (state !== undefined && (typeof state.init !== 'function' || typeof state.clone !== 'function')) {
    throw new ConfigError(`env.module: ${where} exports "state" without init(item) and clone(state) functions`, 'env.module');
  }
  return { tools, state };
}

async function loadToolsEnvironment(options: z.infer<typeof toolsEnvOptions>, context: EnvBuildContext): Promise<EnvironmentFactory> {
  const file = isAbsolute(options.module) ? options.module : resolve(context.baseDir, options.module);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (cause) {
    throw new ConfigError(`env.module: cannot load ${file}: ${(cause as Error).message}`, 'env.module', undefined, { cause });
  }
  const { tools, state } = toolsOfModule(mod, file);
  return toolEnvironmentFactory({ kind: 'tools', tools, state, maxObservationChars: options.maxObservationChars });
}

/** The environment factory an `env` config section describes (ConfigError naming the bad key). */
export async function envFactoryFromConfig(spec: unknown, context: EnvBuildContext): Promise<EnvironmentFactory> {
  const kind = (spec as { kind?: unknown } | null)?.kind;
  const entry = ENV_KINDS.find((k) => (k.schema.shape.kind as z.ZodLiteral<string>).value === kind);
  if (!entry) throw new ConfigError(`env.kind: unknown environment kind ${JSON.stringify(kind)} (known: ${knownEnvKinds().join(', ')})`, 'env.kind');
  const parsed = entry.schema.safeParse(spec);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = ['env', ...issue.path, ...(issue.code === 'unrecognized_keys' ? issue.keys.slice(0, 1) : [])].join('.');
    throw new ConfigError(`${key}: ${issue.message}`, key);
  }
  return entry.build(parsed.data, context);
}
