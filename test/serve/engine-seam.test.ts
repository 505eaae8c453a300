/**
 * The seam between `arbor serve` / the CLI and the engine: files under src/serve/ and src/cli/ import
 * from src/engine/ only open.ts, types.ts and build.ts (static imports, `import type`, re-exports and
 * dynamic imports alike). The scan is checked on a sample first, so a scanner that finds nothing fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
const ALLOWED = new Set(['src/engine/open.ts', 'src/engine/types.ts', 'src/engine/build.ts']);

/** Relative module specifiers of a source text: `from '...'`, `import '...'`, `import('...')`. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\1/g))
    found.push(m[2]);
  return found;
}

/** The engine files a source file at `file` (relative to the root) imports that the seam does not allow. */
function violations(file: string, text: string): string[] {
  return specifiers(text)
    .map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.(m?js)$/, '.ts'))
    .filter((target) => target.startsWith('src/engine/') && !ALLOWED.has(target))
    .map((target) => `${file} imports ${target}`);
}

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.(ts|mts|mjs)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

test('the scanner finds every kind of import into the engine', () => {
  const sample = [
    "import { openModel } from '../engine/open.js';",
    "import type { Sampler } from '../engine/types.js';",
    "import { NanoSampler } from '../engine/embedded/sampler.js';",
    "import type { HFTokenizer } from '../engine/tokenizer/hf.js';",
    "export { LoraAdapter } from '../engine/model/lora.js';",
    "const m = await import('../engine/formats/peft.js');",
    "import {\n  decodeSafetensors,\n} from '../engine/formats/safetensors.js';",
  ].join('\n');
  assert.deepEqual(violations('src/serve/sample.ts', sample), [
    'src/serve/sample.ts imports src/engine/embedded/sampler.ts',
    'src/serve/sample.ts imports src/engine/tokenizer/hf.ts',
    'src/serve/sample.ts imports src/engine/model/lora.ts',
    'src/serve/sample.ts imports src/engine/formats/peft.ts',
    'src/serve/sample.ts imports src/engine/formats/safetensors.ts',
  ]);
});

test('src/serve/ and src/cli/ import from src/engine/ only open.ts, types.ts and build.ts', () => {
  const files = [...sources('src/serve'), ...sources('src/cli')];
  assert.ok(files.length > 20, `scanned ${files.length} files`);
  const found = files.flatMap((f) => violations(f, readFileSync(join(ROOT, f), 'utf8')));
  assert.deepEqual(found, []);
});
