/**
 * `npm run bench -- verifiers`: how far the verifiers can be trusted.
 * - math: every MATH-500 and GSM8K gold solution checked against its own final answer (self-
 *   verification rate), and agreement with the 254 answer-equivalence cases of Math-Verify's tests;
 * - code sandbox: the hostile-program suite (infinite loop, fork bomb, memory bomb, network,
 *   writes outside the temp dir, huge output, environment secrets), fraction contained;
 * - throughput: math verifications per second (one core).
 * Headline: math500_gold_self_verify, gsm8k_gold_self_verify, hostile_programs_contained.
 */
import { existsSync } from 'node:fs';
import { extractAnswer, mathEquivalent, selfVerifyRates } from '../src/filter/math/index.js';
import { runHostileSuite } from '../src/filter/sandbox/hostile.js';
import { defaultDataDir } from '../src/tasks/datasets/task.js';
import { printTable, writeBenchJson } from './util.js';

export async function main(): Promise<void> {
  const dataDir = defaultDataDir();
  if (!existsSync(dataDir)) throw new Error(`verifiers bench: shared data not found at ${dataDir} (set ARBOR_DATA_DIR)`);
  const t0 = performance.now();
  const rates = selfVerifyRates(dataDir);
  const mathMs = performance.now() - t0;

  // throughput of the equivalence check on a fixed mix of answer pairs
  const pairs: Array<[string, string]> = [['\\frac{1}{2}', '0.5'], ['(1,2)', '(1, 2)'], ['2x+3', '3+2x'], ['\\sqrt{8}', '2\\sqrt{2}'], ['7,425,000', '7425000'], ['\\boxed{\\dfrac{3}{4}}', '3/4']];
  let n = 0;
  const t1 = performance.now();
  while (performance.now() - t1 < 1000) for (const [a, b] of pairs) (mathEquivalent(extractAnswer(a) ?? a, b), n++);
  const perSecond = n / ((performance.now() - t1) / 1000);

  const hostile = await runHostileSuite();
  console.log('\nmath verifier');
  printTable([
    { check: 'MATH-500 gold self-verify', rate: rates.math500, seconds: mathMs / 1000 },
    { check: 'GSM8K gold self-verify (test+train)', rate: rates.gsm8k, seconds: null },
    { check: 'Math-Verify peer cases agreement', rate: rates.peerAgreement, seconds: null },
    { check: 'equivalence checks per second', rate: Math.round(perSecond), seconds: null },
  ]);
  console.log('\nhostile programs');
  printTable(hostile.results.map((r) => ({ case: r.name, language: r.language, contained: r.contained ? 'yes' : 'NO', detail: String(r.detail).slice(0, 90) })));
  const headline = {
    math500_gold_self_verify: rates.math500,
    gsm8k_gold_self_verify: rates.gsm8k,
    hostile_programs_contained: hostile.contained / hostile.total,
  };
  console.log('\nheadline', headline);
  writeBenchJson('verifiers', headline, { math: { ...rates, equivalence_checks_per_s: perSecond }, hostile });
}
