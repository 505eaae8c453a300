/**
 * LLM-as-judge over an OpenAI-compatible `/v1/chat/completions` endpoint: a rubric prompt filled with
 * {prompt}, {response}, {answer}; the reply is parsed for "VERDICT: CORRECT|INCORRECT" (→ 1/0) or
 * "SCORE: x" on a 0..maxScore scale (→ x/maxScore). Retries with back-off on 408/429/5xx, network
 * errors and timeouts; an unparseable verdict is a failure (info.error), scored as `failureReward`.
 */
import { Rng } from '../core/rng.js';
import type { RewardFunction } from './types.js';

export interface JudgeOptions {
  /** Base URL of the server (…/v1/chat/completions is appended). */
  baseUrl: string;
  model: string;
  /** Rubric template with {prompt}, {response}, {answer}. */
  rubric?: string;
  apiKey?: string;
  maxScore?: number;
  temperature?: number;
  maxAttempts?: number;
  timeoutMs?: number;
  failureReward?: number;
  /** Back-off base delay (ms). */
  retryDelayMs?: number;
}

export const defaultRubric =
  'You are grading an answer.\nQuestion:\n{prompt}\n\nReference answer:\n{answer}\n\nCandidate response:\n{response}\n\n' +
  'Is the candidate response correct? Reply with one line: "VERDICT: CORRECT" or "VERDICT: INCORRECT".';

/** Parse a judge reply into [0,1], or null when no verdict/score is found. */
export function parseVerdict(text: string, maxScore = 10): number | null {
  const v = /VERDICT\s*:\s*(CORRECT|INCORRECT)/i.exec(text);
  if (v) return v[1].toUpperCase() === 'CORRECT' ? 1 : 0;
  const s = /SCORE\s*:\s*(-?\d+(?:\.\d+)?)/i.exec(text);
  if (s) return Math.min(1, Math.max(0, Number(s[1]) / maxScore));
  return null;
}

export function judgeReward(options: JudgeOptions): RewardFunction {
  const rubric = options.rubric ?? defaultRubric;
  const url = options.baseUrl.replace(/\/+$/, '') + '/v1/chat/completions';
  const jitter = new Rng(0x1ad9e);
  return {
    name: 'judge',
    async score({ response, item }, context) {
      const content = rubric
        .replaceAll('{prompt}', item.prompt)
        .replaceAll('{response}', response)
        .replaceAll('{answer}', item.answer);
      const body = JSON.stringify({
        model: options.model,
        messages: [{ role: 'user', content }],
        temperature: options.temperature ?? 0,
        max_tokens: 256,
      });
      const attempts = options.maxAttempts ?? 4;
      let lastError = '';
      for (let attempt = 1; attempt <= attempts; attempt++) {
        try {
          const signals = [AbortSignal.timeout(options.timeoutMs ?? 60_000)];
          if (context?.signal) signals.push(context.signal);
          const res = await fetch(url, {
            method: 'POST',
            body,
            signal: AbortSignal.any(signals),
            headers: {
              'content-type': 'application/json',
              ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
            },
          });
          const text = await res.text();
          if (res.status === 408 || res.status === 429 || res.status >= 500) {
            lastError = `${url}: HTTP ${res.status}`;
          } else if (!res.ok) {
            return {
              reward: options.failureReward ?? 0,
              components: { judge: options.failureReward ?? 0 },
              info: { error: `${url}: HTTP ${res.status}: ${text.slice(0, 200)}` },
            };
          } else {
            const reply = JSON.parse(text) as { choices?: Array<{ message?: { content?: string } }> };
            const verdictText = reply.choices?.[0]?.message?.content;
            if (typeof verdictText !== 'string')
              throw new Error(`${url}: malformed reply (no choices[0].message.content)`);
            const value = parseVerdict(verdictText, options.maxScore ?? 10);
            if (value === null)
              return {
                reward: options.failureReward ?? 0,
                components: { judge: options.failureReward ?? 0 },
                info: { error: `unparseable verdict: ${verdictText.slice(0, 200)}` },
              };
            return {
              reward: value,
              components: { judge: value },
              info: { verdict: verdictText.slice(0, 500), attempts: attempt },
            };
          }
        } catch (error) {
          if (context?.signal?.aborted) throw error;
          lastError = (error as Error).message;
        }
        if (attempt < attempts)
          await new Promise((r) =>
            setTimeout(r, (options.retryDelayMs ?? 200) * 2 ** (attempt - 1) * (0.5 + jitter.next())),
          );
      }
      return {
        reward: options.failureReward ?? 0,
        components: { judge: options.failureReward ?? 0 },
        info: { error: `judge failed after ${attempts} attempts: ${lastError}` },
      };
    },
  };
}
