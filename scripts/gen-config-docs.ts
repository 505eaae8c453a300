/**
 * Writes docs/config-reference.md from the zod schemas: `configSchema` (src/run/config.ts), each task's
 * options (`taskOptionSchemas()`) and each environment kind (`ENV_KINDS`). Every option gets its
 * dotted path, type, default, bounds and doc string; nothing is typed by hand, so `npm run docs:config`
 * regenerates the whole file and test/docs/config-reference.test.ts fails when the committed one is
 * stale. `--check` only compares (exit 1 when stale). It reads zod 3's public `_def` shapes only.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { z } from 'zod';
import { configSchema } from '../src/run/config.js';
import { taskOptionSchemas } from '../src/tasks/index.js';
import { agentEnvOptions, ENV_KINDS } from '../src/env/index.js';

/** docs/config-reference.md of this checkout, wherever the command runs from. */
export const CONFIG_REFERENCE_FILE = fileURLToPath(new URL('../docs/config-reference.md', import.meta.url));

/** One option: a table row. */
interface Row {
  path: string;
  type: string;
  defaultValue: string;
  bounds: string;
  doc: string;
}

/** A table under a heading (a section, or one variant of a discriminated union). */
interface Block {
  title: string;
  doc: string;
  rows: Row[];
}

/** What unwrapping a schema found: the innermost type and the outermost default / doc / optionality. */
interface Unwrapped {
  inner: z.ZodTypeAny;
  doc?: string;
  hasDefault: boolean;
  defaultValue?: unknown;
  optional: boolean;
}

type Def = {
  typeName?: string;
  innerType?: z.ZodTypeAny;
  schema?: z.ZodTypeAny;
  defaultValue?: () => unknown;
  getter?: () => z.ZodTypeAny;
  checks?: { kind: string; value?: unknown; inclusive?: boolean; regex?: RegExp; message?: string }[];
  minLength?: { value: number } | null;
  maxLength?: { value: number } | null;
  exactLength?: { value: number } | null;
  type?: z.ZodTypeAny;
  valueType?: z.ZodTypeAny;
  values?: readonly string[] | Record<string, string | number>;
  value?: unknown;
  options?: z.ZodTypeAny[] | Map<unknown, z.ZodTypeAny>;
  items?: z.ZodTypeAny[];
  discriminator?: string;
};

const defOf = (schema: z.ZodTypeAny): Def => (schema as unknown as { _def: Def })._def;

/** Strip defaults, optionals, nullables, effects and lazies, keeping the outermost doc and default. */
function unwrap(schema: z.ZodTypeAny): Unwrapped {
  const out: Unwrapped = { inner: schema, hasDefault: false, optional: false };
  let s = schema;
  for (let depth = 0; depth < 16; depth++) {
    out.doc ??= s.description;
    const def = defOf(s);
    if (def.typeName === 'ZodDefault' && !out.hasDefault) {
      out.hasDefault = true;
      out.defaultValue = def.defaultValue?.();
    }
    if (def.typeName === 'ZodOptional') out.optional = true;
    const next = def.typeName === 'ZodLazy' ? def.getter?.() : (def.innerType ?? def.schema);
    if (!next || !['ZodDefault', 'ZodOptional', 'ZodNullable', 'ZodEffects', 'ZodLazy'].includes(def.typeName ?? '')) {
      break;
    }
    s = next;
  }
  out.inner = s;
  return out;
}

const typeNameOf = (schema: z.ZodTypeAny): string => defOf(schema).typeName ?? 'unknown';

function variantsOf(union: z.ZodTypeAny): z.ZodObject<z.ZodRawShape>[] {
  const options = defOf(union).options;
  const list = options instanceof Map ? [...options.values()] : (options ?? []);
  return list as z.ZodObject<z.ZodRawShape>[];
}

function kindOf(variant: z.ZodObject<z.ZodRawShape>, discriminator: string): string {
  return String(defOf(unwrap(variant.shape[discriminator]).inner).value);
}

/** A short type label: `number`, `integer`, `'a' \| 'b'`, `string[]`, `object`, `kind: a \| b`. */
function typeLabel(schema: z.ZodTypeAny): string {
  const { inner } = unwrap(schema);
  const def = defOf(inner);
  switch (def.typeName) {
    case 'ZodNumber':
      return def.checks?.some((c) => c.kind === 'int') ? 'integer' : 'number';
    case 'ZodString':
      return 'string';
    case 'ZodBoolean':
      return 'boolean';
    case 'ZodEnum':
      return (def.values as readonly string[]).map((v) => `'${v}'`).join(' \\| ');
    case 'ZodNativeEnum':
      return Object.values(def.values as Record<string, string>)
        .map((v) => `'${v}'`)
        .join(' \\| ');
    case 'ZodLiteral':
      return JSON.stringify(def.value);
    case 'ZodArray': {
      const element = typeLabel(def.type as z.ZodTypeAny);
      return element.includes('|') ? `(${element})[]` : `${element}[]`;
    }
    case 'ZodRecord':
      return `map of ${typeLabel(def.valueType as z.ZodTypeAny)}`;
    case 'ZodObject':
      return 'object';
    case 'ZodDiscriminatedUnion':
      return `one of kind: ${variantsOf(inner)
        .map((v) => kindOf(v, def.discriminator ?? 'kind'))
        .join(' \\| ')}`;
    case 'ZodUnion':
      return variantsOf(inner)
        .map((o) => typeLabel(o))
        .join(' \\| ');
    case 'ZodTuple':
      return `[${(def.items ?? []).map((o) => typeLabel(o)).join(', ')}]`;
    case 'ZodUnknown':
    case 'ZodAny':
      return 'any';
    default:
      return (def.typeName ?? 'unknown').replace(/^Zod/, '').toLowerCase();
  }
}

function numberText(value: unknown): string {
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value) && Math.abs(value) >= 1e6) {
    const log2 = Math.log2(Math.abs(value));
    if (Number.isInteger(log2)) return `${value < 0 ? '-' : ''}2^${log2}`;
    if (Number.isInteger(Math.log2(Math.abs(value) + 1))) return `2^${Math.log2(Math.abs(value) + 1)}−1`;
  }
  return String(value);
}

/** Bounds of numbers (`[0, 1)`), string and array lengths, string patterns. */
function boundsLabel(schema: z.ZodTypeAny): string {
  const { inner } = unwrap(schema);
  const def = defOf(inner);
  const checks = def.checks ?? [];
  if (def.typeName === 'ZodNumber') {
    const min = checks.find((c) => c.kind === 'min');
    const max = checks.find((c) => c.kind === 'max');
    const parts: string[] = [];
    if (min || max) {
      const low = min ? `${min.inclusive ? '[' : '('}${numberText(min.value)}` : '(−∞';
      // a bound set from this machine's core count (engine.threads) must not make the file machine-specific
      const cores = max?.message?.includes('parallelism') ? "the machine's cores" : undefined;
      const high = max ? `${cores ?? numberText(max.value)}${max.inclusive ? ']' : ')'}` : '∞)';
      parts.push(`${low}, ${high}`);
    }
    const step = checks.find((c) => c.kind === 'multipleOf');
    if (step) parts.push(`multiple of ${numberText(step.value)}`);
    return parts.join('; ');
  }
  if (def.typeName === 'ZodString') {
    const parts: string[] = [];
    const min = checks.find((c) => c.kind === 'min');
    const max = checks.find((c) => c.kind === 'max');
    if (min || max) parts.push(`length ${numberText(min?.value ?? 0)}..${max ? numberText(max.value) : '∞'}`);
    for (const c of checks.filter((c) => c.kind === 'regex')) parts.push(`matches \`${c.regex?.source}\``);
    for (const c of checks.filter((c) => ['url', 'email', 'uuid'].includes(c.kind))) parts.push(c.kind);
    return parts.join('; ');
  }
  if (def.typeName === 'ZodArray') {
    const min = def.exactLength?.value ?? def.minLength?.value;
    const max = def.exactLength?.value ?? def.maxLength?.value;
    if (min === undefined && max === undefined) return '';
    return `${numberText(min ?? 0)}..${max === undefined ? '∞' : numberText(max)} items`;
  }
  return '';
}

function defaultLabel(u: Unwrapped): string {
  if (u.hasDefault) {
    if (u.defaultValue === undefined) return 'unset';
    const isObject = typeof u.defaultValue === 'object' && u.defaultValue !== null && !Array.isArray(u.defaultValue);
    if (isObject && Object.keys(u.defaultValue as object).length === 0) return '`{}`';
    return `\`${JSON.stringify(u.defaultValue)}\``;
  }
  return u.optional ? 'unset' : '**required**';
}

const cell = (text: string): string => text.replace(/\r?\n\s*/g, ' ').replace(/(?<!\\)\|/g, '\\|');

/**
 * Walk `schema` at `path` into `block`: objects add one row per field (recursing into nested objects),
 * discriminated unions add a row here and one block per variant to `blocks`, arrays of objects or
 * unions recurse with `path[]`.
 */
function walk(schema: z.ZodTypeAny, path: string, block: Block, blocks: Block[], row = true): void {
  const u = unwrap(schema);
  const kind = typeNameOf(u.inner);
  if (row) {
    const type = typeLabel(schema) + (u.optional && !u.hasDefault ? ' (optional)' : '');
    const doc = cell(u.doc ?? '');
    block.rows.push({ path, type, defaultValue: defaultLabel(u), bounds: boundsLabel(schema), doc });
  }
  if (kind === 'ZodObject') {
    const shape = (u.inner as z.ZodObject<z.ZodRawShape>).shape;
    for (const [key, field] of Object.entries(shape)) walk(field, path ? `${path}.${key}` : key, block, blocks);
  } else if (kind === 'ZodDiscriminatedUnion') {
    const discriminator = defOf(u.inner).discriminator ?? 'kind';
    const defaultKind = (u.defaultValue as Record<string, unknown> | undefined)?.[discriminator];
    // fields every variant shares (the same schema object: `.extend(common)`) get one row here, not one per variant
    const variants = variantsOf(u.inner);
    const shared = Object.keys(variants[0]?.shape ?? {}).filter(
      (key) => key !== discriminator && variants.every((v) => v.shape[key] === variants[0].shape[key]),
    );
    for (const key of shared) walk(variants[0].shape[key], `${path}.${key}`, block, blocks);
    for (const variant of variants) {
      const name = kindOf(variant, discriminator);
      const marker = name === defaultKind ? ' (default)' : '';
      const variantDoc = cell(unwrap(variant.shape[discriminator]).doc ?? variant.description ?? '');
      const title = `\`${path}\` with \`${discriminator}: ${name}\`${marker}`;
      const sub: Block = { title, doc: variantDoc, rows: [] };
      blocks.push(sub);
      for (const [key, field] of Object.entries(variant.shape)) {
        if (key !== discriminator && !shared.includes(key)) walk(field, `${path}.${key}`, sub, blocks);
      }
    }
  } else if (kind === 'ZodArray') {
    const element = defOf(u.inner).type as z.ZodTypeAny;
    const elementKind = typeNameOf(unwrap(element).inner);
    if (elementKind === 'ZodObject' || elementKind === 'ZodDiscriminatedUnion') {
      walk(element, `${path}[]`, block, blocks, false);
    }
  } else if (kind === 'ZodUnion') {
    for (const option of variantsOf(u.inner)) {
      if (typeNameOf(unwrap(option).inner) === 'ZodObject') walk(option, path, block, blocks, false);
    }
  }
}

function table(rows: Row[]): string[] {
  if (!rows.length) return ['(no options)'];
  const lines = ['| option | type | default | bounds | description |', '|---|---|---|---|---|'];
  for (const r of rows) lines.push(`| \`${r.path}\` | ${r.type} | ${r.defaultValue} | ${r.bounds} | ${r.doc} |`);
  return lines;
}

function render(blocks: Block[], level: string): string[] {
  const lines: string[] = [];
  for (const b of blocks) {
    lines.push('', `${level} ${b.title}`, '');
    if (b.doc) lines.push(b.doc, '');
    lines.push(...table(b.rows));
  }
  return lines;
}

/** The whole reference as Markdown; deterministic (schema order, no dates). */
export function renderConfigReference(): string {
  const lines = [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:config` (scripts/gen-config-docs.ts) from the zod schemas.',
    '     Do not edit by hand: test/docs/config-reference.test.ts fails when this file is stale. -->',
    '',
    'Every option of a run config (YAML or JSON, `arbor train FILE`), with its type, default, bounds and doc',
    'string, generated from the schema the CLI validates with (`src/run/config.ts`). Unknown keys are errors.',
    '`npx arbor config --print-defaults` prints the same defaults as YAML; `npx arbor config --check FILE`',
    'validates a file. Bounds are inclusive `[a, b]` or exclusive `(a, b)`; "unset" means the option is',
    "optional and absent by default. A `kind: a | b` row is a choice of variant, each variant's options",
    'in its own table below. Task options are per `task.name`; environment options per `env.kind`.',
    '',
    '## Sections',
    '',
  ];
  const shape = configSchema.shape as Record<string, z.ZodTypeAny>;
  const sections = Object.keys(shape).filter((s) => s !== 'env');
  for (const s of sections) lines.push(`- [\`${s}\`](#${s.toLowerCase()}): ${cell(unwrap(shape[s]).doc ?? '')}`);
  lines.push('- [Task options per task](#task-options-per-task)', '- [Environments per kind](#environments-per-kind)');
  for (const s of sections) {
    const blocks: Block[] = [];
    const main: Block = { title: s, doc: cell(unwrap(shape[s]).doc ?? ''), rows: [] };
    walk(shape[s], s, main, blocks, typeNameOf(unwrap(shape[s]).inner) !== 'ZodObject');
    lines.push('', `## ${main.title}`, '');
    if (main.doc) lines.push(main.doc, '');
    if (main.rows.length) lines.push(...table(main.rows));
    lines.push(...render(blocks, '###'));
  }
  lines.push('', '## Task options per task', '', 'The options of each built-in task (`task: { name, options }`).');
  for (const [name, schema] of Object.entries(taskOptionSchemas()).sort(([a], [b]) => a.localeCompare(b))) {
    const blocks: Block[] = [];
    const main: Block = { title: `\`task.name: ${name}\``, doc: cell(unwrap(schema).doc ?? ''), rows: [] };
    walk(schema, 'task.options', main, blocks, false);
    lines.push(...render([main, ...blocks], '###'));
  }
  lines.push('', '## Environments per kind', '', cell(unwrap(shape.env).doc ?? ''));
  // the tool environments, then your own agent through the gateway
  for (const schema of [...ENV_KINDS.map((k) => k.schema), agentEnvOptions]) {
    const name = String(defOf(unwrap(schema.shape.kind).inner).value);
    const blocks: Block[] = [];
    const doc = cell(unwrap(schema.shape.kind).doc ?? schema.description ?? '');
    const main: Block = { title: `\`env.kind: ${name}\``, doc, rows: [] };
    for (const [key, field] of Object.entries(schema.shape as Record<string, z.ZodTypeAny>)) {
      if (key !== 'kind') walk(field, `env.${key}`, main, blocks);
    }
    lines.push(...render([main, ...blocks], '###'));
  }
  return lines.join('\n') + '\n';
}

async function main(argv: string[]): Promise<number> {
  const text = renderConfigReference();
  if (argv.includes('--check')) {
    let current: string;
    try {
      current = readFileSync(CONFIG_REFERENCE_FILE, 'utf8');
    } catch {
      current = '';
    }
    if (current === text) return 0;
    console.error(`${CONFIG_REFERENCE_FILE} is stale: run \`npm run docs:config\` and commit the result`);
    return 1;
  }
  writeFileSync(CONFIG_REFERENCE_FILE, text);
  console.log(`wrote ${CONFIG_REFERENCE_FILE} (${text.split('\n').length} lines)`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
