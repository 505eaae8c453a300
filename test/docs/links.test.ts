/**
 * Every relative link of README.md and docs/** points at a file that exists, and a link with an anchor
 * (`guide.md#section`, `#section`) at a heading of that file (GitHub's anchors). Links to URLs are not
 * fetched (no network in tests).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { anchors, docFiles, readDoc, relativeLinks } from '../../testkit/docs/commands.js';

test('every relative link in README.md and docs/ resolves, anchors included', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of docFiles('.')) {
    for (const link of relativeLinks(file, readDoc('.', file))) {
      checked++;
      const target = link.target ? normalize(join(dirname(file), decodeURIComponent(link.target))) : file;
      const at = `${file}:${link.line}: ${link.target}${link.anchor ? `#${link.anchor}` : ''}`;
      if (!existsSync(target)) broken.push(`${at} (no file ${target})`);
      else if (link.anchor && target.endsWith('.md') && !anchors(readDoc('.', target)).has(link.anchor)) {
        broken.push(`${at} (no heading with that anchor in ${target})`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked >= 40, `only ${checked} links found: is the link reader broken?`);
});

test('the link reader: relative links and images, not URLs or code; GitHub anchors', () => {
  const text = ['[a](x.md#Sec) ![i](p.png) [u](https://e.org) `[c](nope.md)`', '```', '[d](nope.md)', '```'].join('\n');
  assert.deepEqual(
    relativeLinks('f.md', text).map((l) => [l.target, l.anchor]),
    [
      ['x.md', 'Sec'],
      ['p.png', undefined],
    ],
  );
  const headings = anchors(
    '# The dashboard: `arbor ui`\n## Hugging Face models against PyTorch (`npm run bench -- hf`)\n## A\n## A',
  );
  assert.deepEqual(
    [...headings],
    ['the-dashboard-arbor-ui', 'hugging-face-models-against-pytorch-npm-run-bench----hf', 'a', 'a-1'],
  );
});
