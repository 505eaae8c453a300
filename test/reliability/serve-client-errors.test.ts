/**
 * Issue 17, defect 9: client errors come back as 400 with the field named (they were 500s, which
 * Arbor's own client retries): max_tokens <= 0, n <= 0, token ids out of range, empty or over-long
 * prompts, negative temperature, top_p > 1, on every sampling API (OpenAI, SGLang, Tinker). 5xx is
 * only for server faults.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { ArborServer } from '../../src/serve/server.js';
import type { Sampler } from '../../src/engine/types.js';
import { ScriptedSampler } from '../remote/scripted-sampler.js';

async function server() {
  const model = await NanoModel.create(
    { vocabSize: 40, dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, contextLength: 16 },
    { seed: 1 },
  );
  return new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: 'm',
    futureWaitMs: 1000,
  });
}
/** Status and error message; the vLLM routes answer with vLLM's envelope {error: {message, type, param, code}}. */
const call = async (s: ArborServer, route: string, body: unknown) => {
  const r = await s.handleRequest('POST', route, JSON.stringify(body));
  const error = (r.body as { error?: string | { message: string; code: number } }).error;
  if (typeof error === 'object') assert.equal(error.code, r.status, 'the envelope repeats the status');
  return { status: r.status, error: typeof error === 'object' ? error.message : error };
};

const completionCases: Array<[Record<string, unknown>, string]> = [
  [{ prompt: [1, 2], max_tokens: 0 }, 'field "max_tokens" must be an integer in [1, 9007199254740991], got 0'],
  [{ prompt: [1, 2], max_tokens: -5 }, 'field "max_tokens" must be an integer in [1, 9007199254740991], got -5'],
  [{ prompt: [1, 2], n: 0 }, 'field "n" must be an integer in [1, 1024] (--max-n), got 0'],
  [{ prompt: [1, 2], n: -1 }, 'field "n" must be an integer in [1, 1024] (--max-n), got -1'],
  [{ prompt: [1, 40] }, 'field "prompt": token id 40 at position 1 is outside the vocabulary of 40'],
  [{ prompt: [1, -2] }, 'field "prompt" must be an array of token ids (non-negative integers)'],
  [{ prompt: [1, 1e30] }, 'field "prompt": token id 1e+30 at position 1 is outside the vocabulary of 40'],
  [{ prompt: [] }, 'field "prompt" must not be empty (give at least one token)'],
  [{ prompt: Array(16).fill(3) }, 'field "prompt": 16 tokens leave no room in the context length of 16'],
  [{ prompt: [1], temperature: -0.5 }, 'field "temperature" must be a number in [0, 10000], got -0.5'],
  [{ prompt: [1], top_p: 1.5 }, 'field "top_p" must be a number in [0, 1], got 1.5'],
  [{ prompt: [1], top_p: 0 }, 'field "top_p" must be a number in (0, 1], got 0'],
  [{ prompt: [1], top_k: -2 }, 'field "top_k" must be an integer in [-1, 9007199254740991], got -2'],
  [{ prompt: [1], logprobs: 21 }, 'field "logprobs" must be an integer in [0, 20], got 21'],
  [{ prompt: [1], n: 2.5 }, 'field "n" must be an integer'],
  [{ prompt: [1], max_tokens: '4' }, 'field "max_tokens" must be a number'],
  [{ prompt: [1], ignore_eos: 'yes' }, 'field "ignore_eos" must be a boolean'],
];

test('/v1/completions: every bad field is a 400 naming it (it was a 500 from the sampler)', async () => {
  const s = await server();
  for (const [body, error] of completionCases)
    assert.deepEqual(await call(s, '/v1/completions', body), { status: 400, error }, JSON.stringify(body));
  // vLLM's envelope names the field as `param`
  const r = await s.handleRequest('POST', '/v1/completions', JSON.stringify({ prompt: [1], top_k: -2 }));
  assert.deepEqual(r.body, {
    error: { message: completionCases[12][1], type: 'BadRequestError', param: 'top_k', code: 400 },
  });
  assert.equal((await call(s, '/v1/completions', { prompt: [1, 2], max_tokens: 3 })).status, 200);
});

test('/generate and Tinker asample: the same checks, with their field names', async () => {
  const s = await server();
  const gen: Array<[Record<string, unknown>, string]> = [
    [
      { input_ids: [1], sampling_params: { max_new_tokens: 0 } },
      'field "sampling_params.max_new_tokens" must be an integer in [1, 9007199254740991], got 0',
    ],
    [{ input_ids: [[1], [2, 99]] }, 'field "input_ids[1]": token id 99 at position 1 is outside the vocabulary of 40'],
    [{ input_ids: [] }, 'field "input_ids" must not be empty (give at least one token)'],
    [{ input_ids: Array(20).fill(1) }, 'field "input_ids": 20 tokens leave no room in the context length of 16'],
    [
      { input_ids: [1], sampling_params: { temperature: -1 } },
      'field "sampling_params.temperature" must be a number in [0, 10000], got -1',
    ],
    [
      { input_ids: [[1], [2]], sampling_params: [{}, { top_p: 2 }] },
      'field "sampling_params[1].top_p" must be a number in [0, 1], got 2',
    ],
    [{ input_ids: [1], sampling_params: 7 }, 'field "sampling_params" must be an object'],
  ];
  for (const [body, error] of gen)
    assert.deepEqual(await call(s, '/generate', body), { status: 400, error }, JSON.stringify(body));
  await call(s, '/api/v1/create_session', { sdk_version: '0.24.1' });
  const { status } = await call(s, '/api/v1/create_sampling_session', { session_id: 'session-1', base_model: 'm' });
  assert.equal(status, 200);
  const asample = (extra: Record<string, unknown>, params: Record<string, unknown> = {}) =>
    call(s, '/api/v1/asample', {
      sampling_session_id: 'sampling-2',
      prompt: { chunks: [{ tokens: [1, 2] }] },
      sampling_params: { max_tokens: 4, ...params },
      ...extra,
    });
  assert.deepEqual(await asample({ num_samples: 0 }), {
    status: 400,
    error: 'field "num_samples" must be an integer in [1, 1024] (--max-n), got 0',
  });
  assert.deepEqual(await asample({}, { max_tokens: 0 }), {
    status: 400,
    error: 'field "sampling_params.max_tokens" is required (a positive integer)',
  });
  assert.deepEqual(await asample({}, { temperature: -2 }), {
    status: 400,
    error: 'field "sampling_params.temperature" must be a number in [0, 10000], got -2',
  });
  assert.deepEqual(await asample({}, { top_p: 1.01 }), {
    status: 400,
    error: 'field "sampling_params.top_p" must be a number in [0, 1], got 1.01',
  });
  assert.deepEqual(await asample({ prompt: { chunks: [{ tokens: [1, 45] }] } }), {
    status: 400,
    error: 'field "prompt.chunks": token id 45 at position 1 is outside the vocabulary of 40',
  });
  assert.deepEqual(await asample({ prompt: { chunks: [{ tokens: [] }] } }), {
    status: 400,
    error: 'field "prompt.chunks" must not be empty (give at least one token)',
  });
  // training data: out-of-vocabulary targets and over-long inputs are 400s, not failed futures
  await call(s, '/api/v1/create_model', { session_id: 'session-1', base_model: 'm' });
  const datum = (tokens: number[], targets: number[]) => ({
    model_input: { chunks: [{ tokens }] },
    loss_fn_inputs: { target_tokens: { data: targets } },
  });
  assert.deepEqual(
    await call(s, '/api/v1/forward_backward', {
      model_id: 'm',
      forward_backward_input: { loss_fn: 'cross_entropy', data: [datum([1, 2], [2, 40])] },
    }),
    {
      status: 400,
      error:
        'field "forward_backward_input.data[0].loss_fn_inputs.target_tokens.data": token id 40 is outside the vocabulary of 40',
    },
  );
  assert.deepEqual(
    await call(s, '/api/v1/forward', {
      model_id: 'm',
      forward_input: { data: [datum(Array(17).fill(1), Array(17).fill(1))] },
    }),
    { status: 400, error: 'field "forward_input.data[0].model_input": 17 tokens exceed the context length of 16' },
  );
  assert.deepEqual(await call(s, '/api/v1/optim_step', { model_id: 'm', adam_params: { learning_rate: 1e300 } }), {
    status: 400,
    error: 'field "adam_params.learning_rate" must be a number in [0, 10], got 1e+300',
  });
  // a load of weights never saved fails its future as the user's error, not the server's
  const load = await s.handleRequest(
    'POST',
    '/api/v1/load_weights',
    JSON.stringify({ model_id: 'm', path: 'never-saved' }),
  );
  const future = await s.handleRequest(
    'POST',
    '/api/v1/retrieve_future',
    JSON.stringify({ request_id: (load.body as { request_id: string }).request_id }),
  );
  assert.deepEqual(future.body, { error: 'field "path": no saved weights named "never-saved"', category: 'user' });
});

test('a body that is not a JSON object is a 400; a sampler fault is a 500', async () => {
  const s = await server();
  for (const text of ['[1,2]', '"x"', '3', '{bad']) {
    const r = await s.handleRequest('POST', '/v1/completions', text);
    assert.equal(r.status, 400, text);
  }
  const broken: Sampler = {
    ...new ScriptedSampler(),
    specificationVersion: 'arbor.sampler.v1',
    capabilities: new ScriptedSampler().capabilities,
    weightVersion: () => 1,
    release: () => undefined,
    sample: async () => {
      throw new Error('device lost');
    },
  };
  const faulty = new ArborServer({ sampler: broken, modelName: 'm' });
  const fault = { message: 'device lost', type: 'InternalServerError', param: null, code: 500 };
  assert.deepEqual(await faulty.handleRequest('POST', '/v1/completions', JSON.stringify({ prompt: [1] })), {
    status: 500,
    body: { error: fault },
  });
  assert.deepEqual(await faulty.handleRequest('POST', '/generate', JSON.stringify({ input_ids: [1] })), {
    status: 500,
    body: { error: 'device lost' },
  });
});
