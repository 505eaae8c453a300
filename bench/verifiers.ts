/**
 * `npm run bench -- verifiers`: how far the verifiers can be trusted.
 * - math: every MATH-500 and GSM8K gold solution checked against its own final answer (self-
 *   verification rate), and agreement with the 254 answer-equivalence cases of Math-Verify's tests
 *   (the disagreements are printed);
 * - GSM8K audit (src/filter/math/gsm8k-audit.ts): each gold solution WITHOUT its `#### N` line must
 *   verify against N through its last stated number (text self-verify), and mutated solutions (N+1,
 *   N·10, sign flipped, each also with a different unit word) must all score 0;
 * - code sandbox: the hostile-program suite (infinite loop, fork bomb, memory bomb, network,
 *   writes outside the temp dir, huge output, environment secrets), fraction contained;
 * - throughput: math verifications per second (one core).
 * Headline: math500_gold_self_verify, gsm8k_gold_self_verify, math_verify_agreement,
 * gsm8k_text_self_verify, gsm8k_mutants_rejected, hostile_programs_contained.
 */
import { existsSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { auditGsm8k, extractAnswer, mathEquivalent, selfVerifyRates } from '../src/filter/math/index.js';
import { runHostileSuite } from '../src/filter/sandbox/hostile.js';
import { defaultDataDir } from '../src/tasks/datasets/task.js';
import { printTable, writeBenchJson } from './util.js';

export async function main(): Promise<void> {
  const dataDir = defaultDataDir();
  if (!existsSync(dataDir))
    throw new Error(`verifiers bench: shared data not found at ${dataDir} (set ARBOR_DATA_DIR)`);
  const t0 = performance.now();
  const rates = selfVerifyRates(dataDir);
  const mathMs = performance.now() - t0;
  const gsmRows = ['test', 'train'].flatMap((split) => {
    const file = join(dataDir, `gsm8k/${split}.jsonl`);
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as { answer: string });
  });
  const t2 = performance.now();
  const audit = auditGsm8k(gsmRows);
  const auditMs = performance.now() - t2;

  // throughput of the equivalence check on a fixed mix of answer pairs
  const pairs: Array<[string, string]> = [
    ['\\frac{1}{2}', '0.5'],
    ['(1,2)', '(1, 2)'],
    ['2x+3', '3+2x'],
    ['\\sqrt{8}', '2\\sqrt{2}'],
    ['7,425,000', '7425000'],
    ['\\boxed{\\dfrac{3}{4}}', '3/4'],
  ];
  let n = 0;
  const t1 = performance.now();
  while (performance.now() - t1 < 1000)
    for (const [a, b] of pairs) {
      mathEquivalent(extractAnswer(a) ?? a, b);
      n++;
    }
  const perSecond = n / ((performance.now() - t1) / 1000);

  const hostile = await runHostileSuite();
  console.log('\nmath verifier');
  printTable([
    { check: 'MATH-500 gold self-verify', rate: rates.math500, seconds: mathMs / 1000 },
    { check: 'GSM8K gold self-verify (test+train)', rate: rates.gsm8k, seconds: null },
    { check: 'Math-Verify peer cases agreement', rate: rates.peerAgreement, seconds: null },
    { check: 'GSM8K text self-verify (no #### line)', rate: audit.textSelfVerify, seconds: auditMs / 1000 },
    { check: `GSM8K answer mutants rejected (${audit.mutants})`, rate: audit.mutantsRejected, seconds: null },
    { check: 'GSM8K right number, other unit word accepted', rate: audit.otherUnitAccepted, seconds: null },
    { check: 'equivalence checks per second', rate: Math.round(perSecond), seconds: null },
  ]);
  console.log('\nMath-Verify cases where the verdict differs (expected verdict, gold, pred)');
  printTable(
    rates.failures.peer.map((f) => ({
      group: f.source,
      expected: String(f.expected),
      gold: f.gold.replace(/\s+/g, ' ').slice(0, 50),
      pred: (f.pred ?? '').replace(/\s+/g, ' ').slice(-60),
    })),
  );
  console.log('\nhostile programs');
  printTable(
    hostile.results.map((r) => ({
      case: r.name,
      language: r.language,
      contained: r.contained ? 'yes' : 'NO',
      detail: String(r.detail).slice(0, 90),
    })),
  );
  const headline = {
    math500_gold_self_verify: rates.math500,
    gsm8k_gold_self_verify: rates.gsm8k,
    math_verify_agreement: rates.peerAgreement,
    gsm8k_text_self_verify: audit.textSelfVerify,
    gsm8k_mutants_rejected: audit.mutantsRejected,
    hostile_programs_contained: hostile.contained / hostile.total,
  };
  console.log('\nheadline', headline);
  writeBenchJson('verifiers', headline, {
    math: { ...rates, equivalence_checks_per_s: perSecond },
    gsm8k_audit: audit,
    hostile,
  });
}
