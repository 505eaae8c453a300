/**
 * A reply a remote sampler cannot read (vLLM/OpenAI completions, SGLang /generate, Tinker asample) is an
 * EngineCallError `<url>: malformed reply: <what>`, never retried, with the reply in its body.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineCallError } from '../../src/core/errors.js';
import { parseCompletionsReply } from '../../src/engine/remote/openai-completions.js';
import { parseGenerateReply } from '../../src/engine/remote/sglang.js';
import { parseSampleResponse } from '../../src/engine/remote/tinker-sampler.js';

const request = { tokens: [1, 2], n: 2, maxTokens: 4 };
const url = 'http://127.0.0.1:1/x';

for (const [name, parse, reply, what] of [
  ['completions', parseCompletionsReply, { object: 'text_completion' }, 'missing "choices" array'],
  ['completions', parseCompletionsReply, { choices: [] }, 'expected 2 choices, got 0'],
  ['sglang', parseGenerateReply, { nothing: 1 }, 'expected 2 outputs, got 1'],
  ['tinker', parseSampleResponse, { sequences: 'x' }, 'missing "sequences" array'],
] as const) {
  test(`${name}: ${JSON.stringify(reply)} is a malformed reply, not retried, reply kept`, () => {
    assert.throws(
      () => (parse as (r: unknown, q: typeof request, u: string, v: number) => unknown)(reply, request, url, 0),
      (e: unknown) =>
        e instanceof EngineCallError &&
        e.message.startsWith(`${url}: malformed reply: ${what}`) &&
        !e.isRetryable &&
        e.details.url === url &&
        e.details.body === JSON.stringify(reply),
    );
  });
}
