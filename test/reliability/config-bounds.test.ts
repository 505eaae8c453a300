/**
 * Issue 17, defects 7 and 8: every numeric option of the config has a finite upper bound in the
 * schema (found by walking the whole zod schema, every registry variant included), an out-of-range
 * value is an error naming its key, and `config --check` rejects what `train` would reject: a top
 * level that is not a mapping, unknown task names and task option keys.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../src/core/errors.js';
import { configSchema, parseConfig } from '../../src/run/config.js';
import { taskOptionSchemas } from '../../src/tasks/index.js';

/** Every ZodNumber in a schema with its dotted path (union variants marked by their kind). */
function numbers(schema: z.ZodTypeAny, path: string, out: Array<{ path: string; schema: z.ZodNumber }>): void {
  const def = schema._def as { typeName: string } & Record<string, unknown>;
  switch (def.typeName) {
    case 'ZodNumber':
      out.push({ path, schema: schema as z.ZodNumber });
      return;
    case 'ZodObject':
      for (const [k, v] of Object.entries((schema as z.ZodObject<z.ZodRawShape>).shape))
        numbers(v as z.ZodTypeAny, path ? `${path}.${k}` : k, out);
      return;
    case 'ZodDiscriminatedUnion':
      for (const o of def.options as z.ZodObject<z.ZodRawShape>[])
        numbers(o, `${path}<${(o.shape.kind as z.ZodLiteral<string>)?._def.value ?? '?'}>`, out);
      return;
    case 'ZodUnion':
      (def.options as z.ZodTypeAny[]).forEach((o, i) => numbers(o, `${path}|${i}`, out));
      return;
    case 'ZodArray':
      numbers(def.type as z.ZodTypeAny, `${path}[]`, out);
      return;
    case 'ZodRecord':
      numbers(def.valueType as z.ZodTypeAny, `${path}{}`, out);
      return;
    case 'ZodTuple':
      (def.items as z.ZodTypeAny[]).forEach((o, i) => numbers(o, `${path}[${i}]`, out));
      return;
    case 'ZodDefault':
      return numbers(def.innerType as z.ZodTypeAny, path, out);
    case 'ZodOptional':
    case 'ZodNullable':
      return numbers(def.innerType as z.ZodTypeAny, path, out);
    case 'ZodEffects':
      return numbers(def.schema as z.ZodTypeAny, path, out);
    case 'ZodLazy':
      return numbers((def.getter as () => z.ZodTypeAny)(), path, out);
    case 'ZodPipeline':
      return numbers(def.in as z.ZodTypeAny, path, out);
    default:
      return;
  }
}

test('every numeric option has a finite maximum and a minimum', () => {
  const found: Array<{ path: string; schema: z.ZodNumber }> = [];
  numbers(configSchema, '', found);
  for (const [name, schema] of Object.entries(taskOptionSchemas())) numbers(schema, `task<${name}>.options`, found);
  assert.ok(
    found.some((f) => f.path.startsWith('task<arith>.options.')),
    'task options are walked too',
  );
  assert.ok(found.length > 100, `the walk reaches the registries' options (${found.length} numbers found)`);
  const unbounded = found
    .filter((f) => !(Number.isFinite(f.schema.maxValue) && Number.isFinite(f.schema.minValue)))
    .map((f) => f.path);
  assert.deepEqual(unbounded, [], `numbers without both bounds:\n${unbounded.join('\n')}`);
});

test('values far out of range are errors naming the key (no V8 crash, no hang, no WebAssembly failure)', () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ run: { promptsPerStep: 1e20 } }, 'run.promptsPerStep'],
    [{ run: { evalCount: 1e15 } }, 'run.evalCount'],
    [{ model: { dModel: 1e8 } }, 'model.dModel'],
    [{ sampling: { maxResponseTokens: 1e9 } }, 'sampling.maxResponseTokens'],
    [{ generate: { kind: 'treepo', groupSize: 1e7 } }, 'generate.groupSize'],
  ];
  for (const [raw, key] of cases) {
    assert.throws(
      () => parseConfig(raw, 'x.yaml'),
      (e: unknown) => e instanceof ConfigError && e.path === key && e.message.includes(key),
      key,
    );
  }
});

const cli = (args: string[]) =>
  spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 60_000 });

test('config --check: a top level that is not a mapping, unknown tasks and unknown task options are errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-check-'));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const bad: Array<[string, RegExp]> = [
    [file('hello.yaml', 'hello\n'), /top level must be a mapping of sections .* got a string/],
    [file('list.yaml', '- run: {}\n- task: {}\n'), /top level must be a mapping .* got a list/],
    [file('task.yaml', 'task: { name: arithmetic }\n'), /unknown task "arithmetic"/],
    [file('opts.yaml', 'task: { name: arith, options: { digitz: 3 } }\n'), /task\.options.*digitz/],
    [file('tag.yaml', '!K\nrun: { steps: 3 }\n'), /not valid YAML: Unresolved tag: !K at line 1/],
  ];
  for (const [p, re] of bad) {
    const r = cli(['config', '--check', p]);
    assert.equal(r.status, 1, `${p}: exit 1 (${r.stdout}${r.stderr})`);
    assert.match(r.stderr, re);
    assert.ok(r.stderr.includes(p), `${p}: the message names the file: ${r.stderr}`);
  }
  const ok = cli(['config', '--check', file('ok.yaml', 'task: { name: arith, options: { digits: 2 } }\n')]);
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /ok/);
});
