/** Shared by the ui tests: a temporary copy of the fixture runs, a synthetic run, and decoding helpers. */
import { cpSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addNode, createTree, treeToJSON, type RolloutTree } from '../../src/core/tree.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/rundirs');
export const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), '../../test-artifacts/ui');

/** A fresh copy of the fixture runs (tests may write into it); remove it with `cleanup`. */
export function tempRuns(): { root: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'arbor-ui-'));
  cpSync(FIXTURES, root, { recursive: true });
  return { root, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

export const tok = new CharTokenizer();

/** A tree with every kind of node the explorer must tell apart: stop, length, abort, error, environment, and a branch decision. */
export function syntheticTree(): RolloutTree {
  const t = createTree('s1p0', '3+4=', [1, ...tok.encode('3+4=')], {
    generator: 'treepo',
    pruned: { paths: 2, tokens: 9 },
  });
  const a = addNode(t, '0', { tokens: tok.encode('3+4'), mask: [1, 1, 1] });
  (a as unknown as Record<string, unknown>).decision = 'entropy 0.91';
  const ok = addNode(t, a.id, { tokens: [...tok.encode('=07;7'), 2], finishReason: 'stop' });
  ok.reward = 1;
  ok.rewardInfo = { components: { correct: 1, format: 1 } };
  (ok as unknown as Record<string, unknown>).advantage = 0.75;
  const bad = addNode(t, a.id, { tokens: tok.encode('=08;8'), finishReason: 'length' });
  bad.reward = 0;
  addNode(t, '0', { tokens: tok.encode('3+'), finishReason: 'abort' });
  const b = addNode(t, '0', { tokens: tok.encode('call'), mask: [1, 1, 1, 1] });
  addNode(t, b.id, { tokens: tok.encode(' obs: 7'), mask: new Array(7).fill(0) });
  const err = addNode(t, b.id, { tokens: [], finishReason: 'error', error: 'reward timed out' });
  err.reward = 0;
  return t;
}

/** A run that is still going: config copied from a fixture, two metric lines, the synthetic tree at step 1, no summary. */
export function writeLiveRun(root: string, name = 'live-run'): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'trees'), { recursive: true });
  writeFileSync(
    join(dir, 'config.resolved.yaml'),
    readFileSync(join(FIXTURES, 'tiny-treepo/config.resolved.yaml'), 'utf8'),
  );
  writeFileSync(
    join(dir, 'metrics.jsonl'),
    [
      { step: 0, eval_greedy_acc: 0.2, tokens_decoded_total: 0, wall_s: 0 },
      { step: 1, reward_mean: 0.5, tokens_decoded_total: 100, wall_s: 1 },
    ]
      .map((m) => JSON.stringify(m) + '\n')
      .join(''),
  );
  writeFileSync(join(dir, 'trees/step-1.jsonl'), treeToJSON(syntheticTree()) + '\n');
  return dir;
}

export function appendMetrics(dir: string, step: number): void {
  writeFileSync(
    join(dir, 'metrics.jsonl'),
    JSON.stringify({ step, reward_mean: 0.5 + step / 100, tokens_decoded_total: 100 * step, wall_s: step }) + '\n',
    { flag: 'a' },
  );
}

/** A complete binary tree with `2^depth` leaves of 8-token segments and 0/1 rewards (a large TreePO tree). */
export function bigTree(depth: number): RolloutTree {
  const t = createTree('big', '12+34=', [1, ...tok.encode('12+34=')]);
  const grow = (id: string, d: number): void => {
    for (let k = 0; k < 2; k++) {
      const n = addNode(t, id, {
        tokens: tok.encode(`${d}:${k}abcde`.slice(0, 8)),
        finishReason: d + 1 === depth ? 'stop' : null,
      });
      if (d + 1 === depth) n.reward = n.id.split('.').reduce((a, b) => a + Number(b), 0) % 2;
      else grow(n.id, d + 1);
    }
  };
  grow('0', 0);
  return t;
}

/** A run with `steps` metric lines of ~40 fields each and one large tree at its last step. */
export function writeBigRun(root: string, steps: number, treeDepth: number): string {
  const dir = join(root, 'big-run');
  mkdirSync(join(dir, 'trees'), { recursive: true });
  writeFileSync(
    join(dir, 'config.resolved.yaml'),
    readFileSync(join(FIXTURES, 'tiny-treepo/config.resolved.yaml'), 'utf8'),
  );
  const lines: string[] = [];
  for (let s = 0; s <= steps; s++) {
    const row: Record<string, number> = {
      step: s,
      tokens_decoded_total: 1000 * s,
      wall_s: s / 2,
      reward_mean: 0.5 + 0.4 * Math.sin(s / 50),
      eval_greedy_acc: s % 100 === 0 ? 0.5 + s / (4 * steps) : NaN,
    };
    for (let k = 0; k < 36; k++) row[`metric_${k}`] = Math.cos(s * (k + 1));
    lines.push(JSON.stringify(row).replace(/"eval_greedy_acc":null,?/, ''));
  }
  writeFileSync(join(dir, 'metrics.jsonl'), lines.join('\n') + '\n');
  writeFileSync(join(dir, `trees/step-${steps}.jsonl`), treeToJSON(bigTree(treeDepth)) + '\n');
  return dir;
}
