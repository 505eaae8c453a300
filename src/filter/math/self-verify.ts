/**
 * Self-verification of the math verifier on shared data: MATH-500 (the boxed answer in each
 * solution must equal its "The answer is: X"), GSM8K (each solution must verify against its
 * `#### N` through the reward's logic), and agreement with Math-Verify's regression cases
 * (`math-verify-cases.jsonl`), overall and per group. Synchronous; reads files from `dataDir`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { extractAnswer, goldAnswer } from './extract.js';
import { mathEquivalent } from './equivalence.js';
import { verifyMath } from './reward.js';

export interface SelfVerifyFailure {
  source: string;
  index: number;
  gold: string;
  pred: string | null;
  expected?: boolean;
}

export interface SelfVerifyReport {
  math500: number;
  gsm8k: number;
  peerAgreement: number;
  peerByGroup: Record<string, { agree: number; total: number; rate: number }>;
  counts: { math500: number; gsm8k: number; peer: number };
  failures: { math500: SelfVerifyFailure[]; gsm8k: SelfVerifyFailure[]; peer: SelfVerifyFailure[] };
}

function readJsonl(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

const str = (v: unknown): string => (typeof v === 'string' ? v : String(v ?? ''));

export function selfVerifyRates(dataDir: string): SelfVerifyReport {
  const failures: SelfVerifyReport['failures'] = { math500: [], gsm8k: [], peer: [] };

  const math = readJsonl(join(dataDir, 'math500/test.jsonl'));
  let mathOk = 0;
  math.forEach((row, index) => {
    const solution = str(row.answer);
    const at = solution.lastIndexOf('The answer is');
    const gold = goldAnswer(solution) ?? '';
    const pred = extractAnswer(at >= 0 ? solution.slice(0, at) : solution);
    if (pred !== null && mathEquivalent(gold, pred)) mathOk++;
    else failures.math500.push({ source: 'math500', index, gold, pred });
  });

  let gsmOk = 0;
  let gsmTotal = 0;
  for (const split of ['test', 'train']) {
    readJsonl(join(dataDir, `gsm8k/${split}.jsonl`)).forEach((row, index) => {
      gsmTotal++;
      const solution = str(row.answer);
      const gold = goldAnswer(solution) ?? '';
      const r = verifyMath(solution, gold);
      if (r.correct) gsmOk++;
      else failures.gsm8k.push({ source: `gsm8k/${split}`, index, gold, pred: r.extracted });
    });
  }

  const peer = readJsonl(join(dataDir, 'math-verify-cases.jsonl'));
  const peerByGroup: SelfVerifyReport['peerByGroup'] = {};
  let agree = 0;
  peer.forEach((row, index) => {
    const g = str(row.gold);
    const p = str(row.pred);
    const expected = row.equal === true;
    const got = mathEquivalent(extractAnswer(g) ?? g, extractAnswer(p) ?? p);
    const group = str(row.group);
    const entry = (peerByGroup[group] ??= { agree: 0, total: 0, rate: 0 });
    entry.total++;
    if (got === expected) {
      agree++;
      entry.agree++;
    } else failures.peer.push({ source: group, index, gold: g, pred: p, expected });
  });
  for (const e of Object.values(peerByGroup)) e.rate = e.total ? e.agree / e.total : 0;

  const rate = (ok: number, n: number) => (n ? ok / n : 0);
  return {
    math500: rate(mathOk, math.length),
    gsm8k: rate(gsmOk, gsmTotal),
    peerAgreement: rate(agree, peer.length),
    peerByGroup,
    counts: { math500: math.length, gsm8k: gsmTotal, peer: peer.length },
    failures,
  };
}
