/**
 * Tests for the math answer verifier (src/filter/math): extraction, the hand-written equivalence
 * table (math-pairs.test.ts), self-verification on the shared MATH-500 / GSM8K data, agreement with Math-Verify's
 * regression cases, and robustness (seeded garbage never throws; results are deterministic).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Rng } from '../../src/core/rng.js';
import {
  extractAnswer,
  goldAnswer,
  mathEquivalent,
  mathReward,
  normalizeAnswer,
  selfVerifyRates,
  type SelfVerifyReport,
} from '../../src/filter/math/index.js';
import { defaultDataDir } from '../../src/tasks/datasets/task.js';

const dataDir = defaultDataDir();
const haveData = existsSync(dataDir);

let cached: SelfVerifyReport | null = null;
const report = (): SelfVerifyReport => (cached ??= selfVerifyRates(dataDir));

test('extractAnswer: boxed with nested braces, last boxed wins', () => {
  assert.equal(extractAnswer('so $\\boxed{\\frac{1}{2}}$.'), '\\frac{1}{2}');
  assert.equal(extractAnswer('first \\boxed{3} then finally \\boxed{\\sqrt{\\frac{a}{b}}} done'), '\\sqrt{\\frac{a}{b}}');
  assert.equal(extractAnswer('\\fbox{42}'), '42');
  assert.equal(extractAnswer('\\boxed{\\{1, 2\\}}'), '\\{1, 2\\}');
  assert.equal(extractAnswer('\\boxed 5'), '5');
  assert.equal(extractAnswer('roots are $\\boxed{-2}$ and $\\boxed{1}$'), '-2, 1');
  assert.equal(extractAnswer('\\boxed{1} no no no \\boxed{2}'), '2');
  assert.equal(extractAnswer('unclosed \\boxed{12'), '12');
});

test('extractAnswer: ####, "the answer is", math spans, none', () => {
  assert.equal(extractAnswer('She makes 9 * 2 = $18 every day.\n#### 18'), '18');
  assert.equal(extractAnswer('blah\n#### 1,234'), '1,234');
  assert.equal(extractAnswer('So the answer is 42.'), '42');
  assert.equal(extractAnswer('The answer is: \\frac{14}{3}'), '\\frac{14}{3}');
  assert.equal(extractAnswer('Final Answer: The final answer is $28 \\%$. I hope it is correct.'), '28 \\%');
  assert.equal(extractAnswer('Final answer: 7.78.'), '7.78');
  assert.equal(extractAnswer('Final Answer: The largest $n$ is 34.'), '34');
  assert.equal(extractAnswer('We find $x = 3$ and so $y = 4$.'), 'y = 4');
  assert.equal(extractAnswer('Answer \\[ 9 \\]'), '9');
  assert.equal(extractAnswer('no answer here at all'), null);
  assert.equal(extractAnswer(''), null);
});

test('goldAnswer: GSM8K and MATH-500 solutions', () => {
  assert.equal(goldAnswer('Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\n#### 18'), '18');
  assert.equal(goldAnswer('so $\\boxed{\\frac{14}{3}}.$The answer is: \\frac{14}{3}'), '\\frac{14}{3}');
  assert.equal(goldAnswer('the answer is $\\boxed{5}$'), '5');
  assert.equal(goldAnswer('nothing'), null);
});

test('normalizeAnswer: canonical forms', () => {
  const cases: [string, string][] = [
    ['$7,425,000$', '7425000'],
    ['1 000', '1000'],
    ['1000.0', '1000'],
    ['.5', '0.5'],
    ['004', '4'],
    ['\\dfrac12', '\\frac{1}{2}'],
    ['\\sqrt2', '\\sqrt{2}'],
    ['x = 3', '3'],
    ['k=\\frac{1}{3}', '\\frac{1}{3}'],
    ['90^\\circ', '90'],
    ['50\\%', '50'],
    ['\\$18', '18'],
    ['\\left( 3, \\frac{\\pi}{2} \\right)', '(3,\\frac{\\pi}{2})'],
    ['15\\mbox{ cm}^2', '15'],
    ['\\text{Evelyn}', 'Evelyn'],
    ['x \\geq 5', 'x>=5'],
  ];
  for (const [input, want] of cases) assert.equal(normalizeAnswer(input), want, input);
});

test('tolerance option is respected', () => {
  assert.equal(mathEquivalent('100', '100.5'), false);
  assert.equal(mathEquivalent('100', '100.5', { tolerance: 0.01 }), true);
  assert.equal(mathEquivalent('3.14159', '3.1416'), true);
  assert.equal(mathEquivalent('3.14159', '3.15'), false);
});

test('mathReward: extraction, short fallback, info', async () => {
  const item = { id: '1', prompt: 'q', answer: '\\frac{1}{2}' };
  const reward = mathReward();
  assert.equal(reward.name, 'math');
  const r1 = await reward.score({ response: 'Reasoning... so the result is $\\boxed{0.5}$.', item });
  assert.equal(r1.reward, 1);
  assert.deepEqual(r1.info, { extracted: '0.5', gold: '\\frac{1}{2}' });
  assert.deepEqual(r1.components, { math: 1 });
  assert.equal((await reward.score({ response: '1/2', item })).reward, 1);
  assert.equal((await reward.score({ response: '\\boxed{2}', item })).reward, 0);
  // Long response without any answer marker: nothing extracted, reward 0.
  const long = 'I think about it for a long time and I am not sure what to say really 1/2 maybe';
  const r2 = await reward.score({ response: long, item });
  assert.equal(r2.reward, 0);
  assert.equal(r2.info.extracted, null);
  // Gold given as a full solution is reduced to its answer.
  const gsm = { id: '2', prompt: 'q', answer: 'work\n#### 1,234' };
  assert.equal((await mathReward({ name: 'correct' }).score({ response: 'The answer is 1234.', item: gsm })).components.correct, 1);
});

test('self-verification on MATH-500 and GSM8K (shared data)', async (t) => {
  if (!haveData) {
    t.skip(`shared data not found at ${dataDir}`);
    return;
  }
  const r = report();
  t.diagnostic(`MATH-500 self-verify: ${(r.math500 * 100).toFixed(2)}% of ${r.counts.math500}`);
  t.diagnostic(`GSM8K self-verify: ${(r.gsm8k * 100).toFixed(2)}% of ${r.counts.gsm8k}`);
  for (const f of [...r.failures.math500, ...r.failures.gsm8k].slice(0, 10)) {
    t.diagnostic(`failure ${f.source}#${f.index}: gold=${JSON.stringify(f.gold)} pred=${JSON.stringify(f.pred)}`);
  }
  assert.equal(r.counts.math500, 500);
  assert.ok(r.counts.gsm8k > 8000);
  assert.ok(r.math500 >= 0.99, `MATH-500 rate ${r.math500}`);
  assert.ok(r.gsm8k >= 0.99, `GSM8K rate ${r.gsm8k}`);
});

test('GSM8K solutions verify through the async mathReward (sample)', async (t) => {
  if (!haveData) {
    t.skip(`shared data not found at ${dataDir}`);
    return;
  }
  const rows = readFileSync(path.join(dataDir, 'gsm8k/test.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .slice(0, 200)
    .map((l) => JSON.parse(l) as { answer: string });
  const reward = mathReward();
  let ok = 0;
  for (const [i, row] of rows.entries()) {
    const gold = goldAnswer(row.answer) ?? '';
    const res = await reward.score({ response: row.answer, item: { id: String(i), prompt: '', answer: gold } });
    ok += res.reward;
    // A wrong gold must fail.
    const wrong = await reward.score({ response: row.answer, item: { id: String(i), prompt: '', answer: String(Number(gold.replace(/,/g, '')) + 1) } });
    assert.equal(wrong.reward, 0, `row ${i}`);
  }
  assert.equal(ok, rows.length);
});

test('agreement with Math-Verify regression cases (shared data)', (t) => {
  if (!haveData) {
    t.skip(`shared data not found at ${dataDir}`);
    return;
  }
  const r = report();
  t.diagnostic(`peer agreement: ${(r.peerAgreement * 100).toFixed(2)}% of ${r.counts.peer}`);
  for (const [group, g] of Object.entries(r.peerByGroup)) {
    t.diagnostic(`  ${group}: ${g.agree}/${g.total} (${(g.rate * 100).toFixed(1)}%)`);
  }
  for (const f of r.failures.peer.slice(0, 10)) {
    t.diagnostic(`disagree [${f.source}] expected=${f.expected} gold=${JSON.stringify(f.gold.slice(0, 80))} pred=${JSON.stringify((f.pred ?? '').slice(-80))}`);
  }
  assert.equal(r.counts.peer, 254);
  assert.ok(r.peerAgreement >= PEER_FLOOR, `peer agreement ${r.peerAgreement} below ${PEER_FLOOR}`);
});

/** Measured agreement minus a small margin (see the report in the test diagnostics). */
const PEER_FLOOR = 0.87;

test('random garbage never throws; results are deterministic', () => {
  const rng = new Rng(1234);
  const alphabet = ['\\frac', '\\sqrt', '{', '}', '(', ')', '[', ']', '\\{', '\\}', '^', '_', '=', '<', '>', ',', '$', '\\boxed{', '####', 'x', 'y', 'e', '\\pi', '1', '2', '0.5', '-', '+', '*', '/', '|', '!', '\\', ' ', '\\text{', 'cm', '%', '\\left(', '\\right)', '\\begin{pmatrix}', '\\end{pmatrix}', '&', '\\\\', '\\cup', 'The answer is', '\n'];
  for (let i = 0; i < 1500; i++) {
    const n = rng.intRange(0, 30);
    let a = '';
    let b = '';
    for (let j = 0; j < n; j++) a += alphabet[rng.int(alphabet.length)];
    for (let j = 0; j < rng.intRange(0, 12); j++) b += alphabet[rng.int(alphabet.length)];
    const first = mathEquivalent(a, b);
    assert.equal(typeof first, 'boolean');
    assert.equal(mathEquivalent(a, b), first);
    assert.doesNotThrow(() => extractAnswer(a));
    assert.doesNotThrow(() => normalizeAnswer(a));
  }
  // Pathological sizes stay bounded.
  assert.equal(typeof mathEquivalent('('.repeat(5000), ')'.repeat(5000)), 'boolean');
  assert.equal(typeof mathEquivalent('x^'.repeat(300) + '2', '1'), 'boolean');
  assert.equal(mathEquivalent('\\frac{x}{2}', '0.5x'), mathEquivalent('\\frac{x}{2}', '0.5x'));
});
