/**
 * docs/config-reference.md is what scripts/gen-config-docs.ts writes from the schemas now: a stale file
 * (an option added, a default or a bound changed) fails here, and `npm run docs:config` regenerates it.
 * The reference also covers every option: each leaf of the default config has a row.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CONFIG_REFERENCE_FILE, renderConfigReference } from '../../scripts/gen-config-docs.js';
import { parseConfig } from '../../src/run/config.js';

const generated = renderConfigReference();

test('the committed configuration reference is current (regenerate: npm run docs:config)', () => {
  const committed = readFileSync(CONFIG_REFERENCE_FILE, 'utf8');
  if (committed !== generated) {
    const a = committed.split('\n');
    const b = generated.split('\n');
    const i = a.findIndex((line, k) => line !== b[k]);
    assert.fail(
      `docs/config-reference.md is stale from line ${i + 1}:\n  committed: ${a[i]}\n  generated: ${b[i]}\n` +
        'run `npm run docs:config` and commit the result',
    );
  }
  const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
  assert.match(scripts['docs:config'] ?? '', /scripts\/gen-config-docs\.ts/);
});

test('every option of the default config has a row with its default', () => {
  // path → default; a path that several variants share (generate.groupSize) is checked for presence only
  const rows = new Map<string, string | undefined>();
  for (const m of generated.matchAll(/^\| `([^`]+)` \| (?:[^|\\]|\\\|)* \| ([^|]*) \|/gm)) {
    rows.set(m[1], rows.has(m[1]) ? undefined : m[2].trim());
  }
  const missing: string[] = [];
  const walk = (value: unknown, path: string): void => {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k);
    } else if (!rows.has(path) && !path.endsWith('.kind')) missing.push(path);
    else if (rows.get(path) !== undefined && value !== undefined) {
      assert.equal(rows.get(path), `\`${JSON.stringify(value)}\``, `default of ${path}`);
    }
  };
  walk(parseConfig({}), '');
  assert.deepEqual(missing, []);
  assert.equal(rows.get('run.steps'), '`40`');
});
