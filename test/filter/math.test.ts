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
  assert.equal(
    extractAnswer('first \\boxed{3} then finally \\boxed{\\sqrt{\\frac{a}{b}}} done'),
    '\\sqrt{\\frac{a}{b}}',
  );
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
  assert.equal(
    (await mathReward({ name: 'correct' }).score({ response: 'The answer is 1234.', item: gsm })).components.correct,
    1,
  );
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
    const wrong = await reward.score({
      response: row.answer,
      item: { id: String(i), prompt: '', answer: String(Number(gold.replace(/,/g, '')) + 1) },
    });
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
    t.diagnostic(
      `disagree [${f.source}] expected=${f.expected} gold=${JSON.stringify(f.gold.slice(0, 80))} pred=${JSON.stringify((f.pred ?? '').slice(-80))}`,
    );
  }
  assert.equal(r.counts.peer, 254);
  assert.ok(r.peerAgreement >= PEER_FLOOR, `peer agreement ${r.peerAgreement} below ${PEER_FLOOR}`);
});

// Issue 18 gaps found through Math-Verify's regression cases; hand-written pairs, exact verdicts.
test('matrix arithmetic: sums, differences, products and scalar multiples of written matrices', () => {
  const I = '\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}';
  const A = '\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}';
  const B = '\\begin{bmatrix}5 & 6 \\\\ 7 & 8\\end{bmatrix}';
  const m = (a: number, b: number, c: number, d: number) =>
    `\\begin{pmatrix}${a} & ${b} \\\\ ${c} & ${d}\\end{pmatrix}`;
  const cases: Array<[string, string, boolean]> = [
    [m(6, 8, 10, 12), `${A} + ${B}`, true],
    [m(6, 8, 10, 13), `${A} + ${B}`, false],
    [m(-4, -4, -4, -4), `${A} - ${B}`, true],
    [m(19, 22, 43, 50), `${A} ${B}`, true],
    [m(19, 22, 43, 50), `${A} \\cdot ${B}`, true],
    [m(23, 34, 31, 46), `${A} ${B}`, false], // B·A, not A·B
    [m(2, 4, 6, 8), `2${A}`, true],
    [m(2, 4, 6, 8), `2 \\cdot ${A}`, true],
    [m(-1, -2, -3, -4), `-${A}`, true],
    [A, `${I} ${A}`, true],
    [m(1, 0, 0, 1), `${I}${I}`, true],
    [m(7, 10, 15, 22), `${A}^2`, false], // powers are not evaluated
    [
      '\\begin{pmatrix}x+1 \\\\ 2x\\end{pmatrix}',
      '\\begin{pmatrix}1 \\\\ x\\end{pmatrix} + \\begin{pmatrix}x \\\\ x\\end{pmatrix}',
      true,
    ],
    [m(1, 2, 3, 4), `${A} + \\begin{pmatrix}1 & 2\\end{pmatrix}`, false], // shapes differ
  ];
  for (const [gold, pred, want] of cases) assert.equal(mathEquivalent(gold, pred), want, `${gold} vs ${pred}`);
});

test('an equation against its solved form; an equation between constants against its value', () => {
  assert.equal(mathEquivalent('2x+4y-3=0', 'y=-\\frac{1}{2}x+\\frac{3}{4}'), true);
  assert.equal(mathEquivalent('y=-\\frac{1}{2}x+\\frac{3}{4}', '2x+4y-3=0'), true);
  assert.equal(mathEquivalent('2x+4y-3=0', 'y=-\\frac{1}{2}x+\\frac{1}{4}'), false);
  assert.equal(mathEquivalent('x^2+y^2=4', 'y^2=4-x^2'), true);
  assert.equal(mathEquivalent('x^2+y^2=4', 'y=\\sqrt{4-x^2}'), false);
  assert.equal(mathEquivalent('10/9', '\\frac{1}{2} \\$ = \\frac{10}{9}'), true);
  assert.equal(mathEquivalent('10/9', '\\frac{10}{9} = \\frac{1}{2}'), false);
  assert.equal(mathEquivalent('a+3z=0', '0'), false); // an equation with unknowns is not its right side
  assert.equal(mathEquivalent('0', 'a+3z=0'), false);
});

test('units, currency codes and words around a lone amount', () => {
  const equal: Array<[string, string]> = [
    ['1000.99', '1,000.99€'],
    ['1000.99', '1,000.99m²'],
    ['12', 'USD 12'],
    ['12', '12 USD'],
    ['12', 'Rs. 12'],
    ['12', '12 rupees'],
    ['30', '30 km/h'],
    ['12', '12 sq. ft'],
    ['2.5', '2.5 hrs'],
    ['25', '25ml'],
    ['12', '12 apples'],
    ['5', '5 more cookies'],
    ['2.74', '2,74 €'],
  ];
  for (const [g, p] of equal) assert.equal(mathEquivalent(g, p), true, `${g} vs ${p}`);
  const different: Array<[string, string]> = [
    ['13', '12 apples'],
    ['1000.99', '1,001.99€'],
    ['12', 'USD 120'],
    ['-12', '12 USD'],
    ['2m', '2'],
    ['4s', '4'],
  ];
  for (const [g, p] of different) assert.equal(mathEquivalent(g, p), false, `${g} vs ${p}`);
  assert.equal(normalizeAnswer('3m'), '3m'); // a glued one-letter unit only with a written square/cube
});

test('several answers: same-line boxes, adjacent math spans, ;-separated solutions, glued "or"', () => {
  assert.equal(extractAnswer('\\boxed{1} papers and \\boxed{2} bins'), '1, 2');
  assert.equal(extractAnswer('$\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}$'), '(3, 3), (1, 1)');
  assert.equal(extractAnswer('\\boxed{35 cm} ++++++ \\boxed{4}'), '35 cm, 4');
  assert.equal(extractAnswer('\\boxed{1} no no no \\boxed{2}'), '2'); // a correction, not a list
  assert.equal(extractAnswer('first \\boxed{3}.\nThen \\boxed{4}'), '4');
  assert.equal(extractAnswer('$1$ and $2$ and $3$'), '1, 2, 3');
  assert.equal(extractAnswer('$21,16$ or $11$'), '21,16, 11');
  assert.equal(extractAnswer('We find $x = 3$ and so $y = 4$.'), 'y = 4');
  assert.equal(extractAnswer('Answer $ \\frac{1}{2} \\$ = \\frac{10}{9} $'), '\\frac{1}{2} \\$ = \\frac{10}{9}');
  assert.equal(mathEquivalent('1,2,3', '$1$ and $2$ and $3$'.replace(/\$/g, '')), true);
  assert.equal(mathEquivalent('p=5,q=2;p=7,q=2', '(5,2),(7,2)'), true);
  assert.equal(mathEquivalent('p=5,q=2;p=7,q=2', '(7,2),(5,2)'), true);
  assert.equal(mathEquivalent('p=5,q=2;p=7,q=2', '(2,5),(2,7)'), false);
  assert.equal(mathEquivalent('W(n) = 1 \\text{ and } W(n) = -1', 'W(x)=1orW(x)=-1'), true);
  assert.equal(mathEquivalent('W(n) = 1 \\text{ and } W(n) = -1', 'W(x)=1orW(x)=-2'), false);
  assert.equal(mathEquivalent('\\frac{639}{40}', '15\\frac{39}{40}, \\frac{639}{40}'), true); // alternatives of one value
  assert.equal(mathEquivalent('\\frac{639}{40}', '15\\frac{39}{40}, 16'), false);
  assert.equal(mathEquivalent('14916', '14 {, }916'), true);
});

test('"The final answer is X" after the last box wins; prose around one number', () => {
  assert.equal(
    extractAnswer(
      'so $\\boxed{255}$. Then $10,200 + $255. Final Answer: The final answer is $10,455$. I hope it is correct.',
    ),
    '10,455',
  );
  assert.equal(extractAnswer('The final answer is $\\boxed{5}$.'), '5');
  assert.equal(
    extractAnswer('\\boxed{12 $ and $13 }. Final Answer: The final answer is \\"$12 $ and $13 $\\".'),
    '12, 13',
  );
  assert.equal(extractAnswer('Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.'), '3');
  assert.equal(extractAnswer('Final Answer: it took 3 hours and 20 minutes.'), 'it took 3 hours and 20 minutes');
});

/** Measured agreement minus a small margin (see the report in the test diagnostics). */
const PEER_FLOOR = 0.95;

test('random garbage never throws; results are deterministic', () => {
  const rng = new Rng(1234);
  const alphabet = [
    '\\frac',
    '\\sqrt',
    '{',
    '}',
    '(',
    ')',
    '[',
    ']',
    '\\{',
    '\\}',
    '^',
    '_',
    '=',
    '<',
    '>',
    ',',
    '$',
    '\\boxed{',
    '####',
    'x',
    'y',
    'e',
    '\\pi',
    '1',
    '2',
    '0.5',
    '-',
    '+',
    '*',
    '/',
    '|',
    '!',
    '\\',
    ' ',
    '\\text{',
    'cm',
    '%',
    '\\left(',
    '\\right)',
    '\\begin{pmatrix}',
    '\\end{pmatrix}',
    '&',
    '\\\\',
    '\\cup',
    'The answer is',
    '\n',
  ];
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
