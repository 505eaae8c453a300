/**
 * The layout bench's scanner (bench/layout.ts) on a small tree written here: a folder cycle, an arrow
 * back up the floors, a serve/ import of an engine internal and a long function must each be found, and
 * what only looks like them (imports and braces in comments and strings, a type-only seam import) must not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { floorOrder, functionSpans, layoutFigures, scanImports, testTiming } from '../bench/layout.js';

const LAYOUT = `# Layout

## Floors

1. \`core/\`: the bottom
2. \`engine/\`
3. \`serve/\`
4. \`run/\`
5. \`cli/\`

## Other
1. \`nothing/\`
`;

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'arbor-layout-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const longBody = Array.from({ length: 130 }, (_, i) => `  total += ${i};`).join('\n');

test('floorOrder: the numbered list under "Floors", bottom first', () => {
  assert.deepEqual(floorOrder(LAYOUT), ['core', 'engine', 'serve', 'run', 'cli']);
  assert.deepEqual(floorOrder('# Layout\nno floors\n'), []);
});

test('scanImports: static, re-export, side-effect and dynamic imports; none from comments or strings', () => {
  const text = [
    "import { a } from './a.js';",
    "import type { B } from '../b.js';",
    'import {',
    '  c,',
    '  d,',
    "} from './cd.js';",
    "export * from './e.js';",
    "import './side.js';",
    "// import { x } from './commented.js';",
    'const s = "import { y } from \'./in-string.js\'";',
    "const m = await import('./dynamic.js');",
  ].join('\n');
  assert.deepEqual(
    scanImports(text).map((i) => [i.spec, i.line, i.typeOnly]),
    [
      ['./a.js', 1, false],
      ['../b.js', 2, true],
      ['./cd.js', 3, false],
      ['./e.js', 7, false],
      ['./side.js', 8, false],
      ['./dynamic.js', 11, false],
    ],
  );
});

test('functionSpans: declarations, methods and arrow consts, with braces in strings, templates, regexes and types', () => {
  const text = [
    'export function f(a: { x: number }): { y: number } {', // 1
    "  const s = '}}}';", // 2
    '  const t = `${a.x} }`;', // 3
    '  const r = /[}]+/g;', // 4
    '  return { y: a.x };', // 5
    '}', // 6
    'class K {', // 7
    '  async method<T>(v: T): Promise<T> {', // 8
    '    // }', // 9
    '    return v;', // 10
    '  }', // 11
    '  declared(): void;', // 12
    '}', // 13
    'const g = async (n: number): Promise<number> => {', // 14
    '  return n;', // 15
    '};', // 16
    'const h = (n: number) => n + 1;', // 17
  ].join('\n');
  assert.deepEqual(
    functionSpans(text).map((s) => [s.name, s.line, s.lines]),
    [
      ['f', 1, 6],
      ['method', 8, 4],
      ['g', 14, 3],
    ],
  );
});

test('layoutFigures: a cycle, an arrow back up, a serve import of an engine internal and a long function', () => {
  const root = tree({
    'core/util.ts': 'export const one = 1;\n',
    // engine -> run: up two floors, and run -> engine closes a cycle
    'engine/types.ts':
      "import { loop } from '../run/loop.js';\nexport interface Sampler { n: number }\nexport const l = loop;\n",
    'engine/model/model.ts': "import { one } from '../../core/util.js';\nexport const model = one;\n",
    'engine/open.ts': "export { model } from './model/model.js';\n",
    // serve: one import through the seam (open.ts, types.ts), one past it
    'serve/server.ts': [
      "import type { Sampler } from '../engine/types.js';",
      "import { model } from '../engine/open.js';",
      "import { model as again } from '../engine/model/model.js';",
      "import { model as third } from '../engine/model/model.js';",
      'export const s: Sampler | number = model + again + third;',
    ].join('\n'),
    'run/loop.ts': [
      "import { one } from '../core/util.js';",
      "import type { Sampler } from '../engine/types.js';",
      'export function loop(sampler?: Sampler): number {',
      '  let total = one;',
      longBody,
      '  return total + (sampler?.n ?? 0);',
      '}',
    ].join('\n'),
    'cli/main.ts': "import { loop } from '../run/loop.js';\nexport const main = () => loop();\n",
    'index.ts': "export { main } from './cli/main.js';\n",
  });
  try {
    const figures = layoutFigures(root, floorOrder(LAYOUT));
    assert.deepEqual(figures.headline, {
      serve_engine_internal_imports: 1,
      import_cycles: 1,
      arrows_back_up: 1,
      longest_function_lines: 134,
    });
    assert.deepEqual(figures.cycles, [['engine', 'run']]);
    assert.deepEqual(
      figures.backUp.map((a) => [a.from, a.to, a.imports.map((e) => `${e.from}:${e.line}`)]),
      [['engine', 'run', ['engine/types.ts:1']]],
    );
    assert.deepEqual(figures.internal, [{ from: 'serve/server.ts', to: 'engine/model/model.ts' }]);
    const [longest] = figures.functions;
    assert.deepEqual([longest.file, longest.name, longest.line, longest.lines], ['run/loop.ts', 'loop', 3, 134]);
    assert.ok(
      !figures.functions.some((f) => f.file === 'cli/main.ts'),
      'an arrow with an expression body is not counted',
    );
    assert.deepEqual(figures.unplaced, []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('testTiming: absent, from another commit or not run by npm test (null), or the whole npm test of this commit', () => {
  const root = tree({});
  try {
    const file = join(root, 'test-timing.json');
    assert.equal(testTiming(file, 'abc').seconds, null);
    assert.match(testTiming(file, 'abc').note, /absent/);
    const record = { total_seconds: 412.5, npm_test_seconds: 470.2, cores: 2, date: '2025-01-01', commit: 'old' };
    writeFileSync(file, JSON.stringify(record));
    assert.equal(testTiming(file, 'abc').seconds, null);
    assert.match(testTiming(file, 'abc').note, /written at old, the checkout is at abc/);
    assert.equal(testTiming(file, 'old').seconds, 470.2);
    assert.match(testTiming(file, 'old').note, /the test runner 412\.5 s of it/);
    writeFileSync(file, JSON.stringify({ ...record, npm_test_seconds: null }));
    assert.equal(testTiming(file, 'old').seconds, null);
    assert.match(testTiming(file, 'old').note, /run the whole `npm test` \(the runner alone took 412\.5 s\)/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('engine floors: an import inside engine/ that goes up a sub-floor, and a cycle between sub-floors, are found', () => {
  const layout = `${LAYOUT}\n## Engine floors\n\n1. \`types\`\n2. \`model\`\n3. \`embedded\`\n4. \`assembly\`\n`;
  assert.deepEqual(floorOrder(layout, 'Engine floors'), ['types', 'model', 'embedded', 'assembly']);
  const root = tree({
    'engine/types.ts': 'export type T = number;\n',
    'engine/model/forward.ts':
      "import type { T } from '../types.js';\nimport { save } from '../embedded/trainer.js';\n",
    'engine/embedded/trainer.ts': "import '../model/forward.js';\nexport const save = 1;\n",
    'engine/build.ts': "import { save } from './embedded/trainer.js';\n",
  });
  try {
    const floors = floorOrder(layout);
    const f = layoutFigures(root, floors, floorOrder(layout, 'Engine floors'));
    assert.deepEqual(
      f.backUp.map((a) => [a.from, a.to, a.imports.map((e) => `${e.from}:${e.line}`)]),
      [['engine:model', 'engine:embedded', ['engine/model/forward.ts:2']]],
    );
    assert.deepEqual(f.cycles, [['engine:embedded', 'engine:model']]);
    // the same tree with the import going down only
    const fixed = tree({
      'engine/model/forward.ts': 'export const f = 1;\n',
      'engine/embedded/trainer.ts': "import '../model/forward.js';\n",
    });
    try {
      const g = layoutFigures(fixed, floors, floorOrder(layout, 'Engine floors'));
      assert.deepEqual([g.backUp.length, g.cycles.length], [0, 0]);
    } finally {
      rmSync(fixed, { recursive: true, force: true });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
