/**
 * Math answer verifier for the Filter stage: extraction, normalization, equivalence, the reward, and
 * the self-verification routine used by tests and benchmarks, and the GSM8K audit (text-only
 * self-verification and answer mutants).
 */
export { extractAnswer, goldAnswer, findBoxed, lastBoxed, stripMathDelimiters } from './extract.js';
export { normalizeAnswer, normalizeDetailed, type Normalized } from './normalize.js';
export { mathEquivalent, type EquivalenceOptions } from './equivalence.js';
export { parseExpression, evaluate, variables, ParseError, type Node } from './expr.js';
export { mathReward, verifyMath, responseAnswer, SHORT_RESPONSE_CHARS, type MathRewardOptions } from './reward.js';
export { selfVerifyRates, type SelfVerifyReport, type SelfVerifyFailure } from './self-verify.js';
export {
  auditGsm8k,
  auditScore,
  lastStatedNumber,
  mutateSolution,
  mutatedValues,
  stripFinalAnswerLine,
  textSelfVerify,
  type Gsm8kAuditReport,
  type Mutant,
  type StatedNumber,
} from './gsm8k-audit.js';
