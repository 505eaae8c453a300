/**
 * Property-based fuzzing of every HTTP body `arbor serve` accepts: OpenAI /v1/completions,
 * SGLang /generate, /abort_request, /update_weights_from_disk, and the Tinker API under /api/v1/*
 * (sessions, sampling sessions, asample, create_model, forward_backward, forward, optim_step,
 * save/load weights, retrieve_future), plus raw bodies that are not JSON objects. Bodies come from
 * fast-check arbitraries that mix well-formed fields with hostile values (wrong types, huge and negative
 * numbers, out-of-vocabulary ids, deep values), and are answered in process through
 * `ArborServer.handleRequest` against a tiny real nano model. A case fails when the server answers
 * 5xx, throws, takes longer than the per-case limit (a hang), or a Tinker future fails with category
 * "server" for client input. `runServeFuzz` is shared by test/reliability/serve-fuzz.test.ts and benches.
 */
import fc from 'fast-check';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { ArborServer } from '../../src/serve/server.js';
import { nanoWeightLoader } from '../../src/serve/weights.js';

export interface FuzzReport {
  /** Cases run (requests answered), in total and per body. */
  cases: number;
  byBody: Record<string, number>;
  /** Cases that crashed, hung, answered 5xx, or failed a Tinker future as a server fault. */
  failures: number;
  /** HTTP 5xx answers (and server-category future failures) to client input. */
  serve5xx: number;
  /** Status codes seen, for the record. */
  statuses: Record<string, number>;
  /** Up to 5 failing cases: route, body and answer. */
  examples: string[];
  wallMs: number;
}

const CONTEXT = 24;

/** A tiny served model: the fuzz exercises validation and the sampling/training paths, not speed. */
async function fuzzServer(root: string): Promise<{ server: ArborServer; vocab: number; close: () => Promise<void> }> {
  const tokenizer = new CharTokenizer();
  const model = await NanoModel.create(
    { vocabSize: tokenizer.vocabSize, dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, contextLength: CONTEXT },
    { seed: 1 },
  );
  const weights = join(root, 'weights');
  saveCheckpoint(join(weights, 'good'), model, tokenizer);
  mkdirSync(join(weights, 'empty'), { recursive: true });
  mkdirSync(join(weights, 'garbage'), { recursive: true });
  writeFileSync(
    join(weights, 'garbage', 'model.safetensors'),
    Buffer.from('\x10\x00\x00\x00\x00\x00\x00\x00{"a":1}         '),
  );
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: 'nano',
    futureWaitMs: 0,
    stateDir: join(root, 'state'),
    decode: (t) => tokenizer.decode(t, true),
    prepareWeights: nanoWeightLoader(model),
    weightsRoots: [weights],
    eosTokenId: tokenizer.eos,
    limits: { maxN: 8, maxBatchTokens: 64, maxConcurrent: 4 },
  });
  return { server, vocab: tokenizer.vocabSize, close: () => server.close() };
}

/** A value of any JSON-ish kind, hostile numbers and strings included. */
const hostile = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -3, max: 3 }),
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, 1e300, -1e300, 2 ** 53, 2 ** 31, 1e-320, 0.5, 1.5),
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', '1', 'NaN', '__proto__', '../../etc/passwd', '\u0000'),
  fc.array(fc.integer({ min: -2, max: 200 }), { maxLength: 8 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** A mostly well-formed value, sometimes replaced by a hostile one. */
const field = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ arbitrary: good, weight: 10 }, { arbitrary: hostile, weight: 1 });

function bodies(
  vocab: number,
  roots: { weights: string; outside: string },
): Record<string, { route: string; arb: fc.Arbitrary<unknown> }> {
  const id = fc.integer({ min: 0, max: vocab - 1 });
  // prompts: short ones, ones at and past the context length, ones with an id just outside the vocabulary
  const tokens = fc.oneof(
    { arbitrary: fc.array(id, { minLength: 1, maxLength: 8 }), weight: 6 },
    { arbitrary: fc.array(id, { minLength: CONTEXT - 2, maxLength: CONTEXT + 2 }), weight: 1 },
    {
      arbitrary: fc
        .tuple(fc.array(id, { maxLength: 4 }), fc.integer({ min: vocab, max: vocab + 3 }))
        .map(([a, x]) => [...a, x]),
      weight: 1,
    },
  );
  const datum = fc.integer({ min: 1, max: CONTEXT + 1 }).chain((len) =>
    fc.record(
      {
        model_input: field(
          fc.record({
            chunks: field(
              fc.array(
                fc.record(
                  {
                    tokens: field(fc.array(fc.integer({ min: 0, max: vocab - 1 }), { minLength: len, maxLength: len })),
                    type: field(fc.constant('encoded_text')),
                  },
                  { requiredKeys: ['tokens'] },
                ),
                { minLength: 1, maxLength: 1 },
              ),
            ),
          }),
        ),
        loss_fn_inputs: field(
          fc.record(
            {
              target_tokens: field(
                fc.record({
                  data: field(fc.array(fc.integer({ min: 0, max: vocab - 1 }), { minLength: len, maxLength: len })),
                }),
              ),
              weights: field(
                fc.record({
                  data: field(fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: len, maxLength: len })),
                }),
              ),
              logprobs: field(
                fc.record({
                  data: field(
                    fc.array(fc.double({ min: -5, max: 0, noNaN: true }), { minLength: len, maxLength: len }),
                  ),
                }),
              ),
              advantages: field(
                fc.record({
                  data: field(
                    fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: len, maxLength: len }),
                  ),
                }),
              ),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: [] },
    ),
  );
  const rec = (shape: Record<string, fc.Arbitrary<unknown>>) => fc.record(shape, { requiredKeys: [] });
  return {
    completions: {
      route: '/v1/completions',
      arb: rec({
        model: field(fc.constant('nano')),
        prompt: field(tokens),
        n: field(fc.integer({ min: 1, max: 4 })),
        max_tokens: field(fc.integer({ min: 1, max: 40 })),
        temperature: field(fc.double({ min: 0, max: 2, noNaN: true })),
        top_p: field(fc.double({ min: 0, max: 1, noNaN: true })),
        top_k: field(fc.integer({ min: -1, max: 5 })),
        logprobs: field(fc.integer({ min: 0, max: 5 })),
        seed: field(fc.integer({ min: 0, max: 1000 })),
        stop_token_ids: field(fc.array(fc.integer({ min: 0, max: vocab - 1 }), { maxLength: 3 })),
        ignore_eos: field(fc.boolean()),
        return_token_ids: field(fc.boolean()),
        return_tokens_as_token_ids: field(fc.boolean()),
        stream: field(fc.constant(false)),
      }),
    },
    generate: {
      route: '/generate',
      arb: rec({
        input_ids: field(fc.oneof(tokens, fc.array(tokens, { minLength: 1, maxLength: 3 }))),
        sampling_params: field(
          fc.oneof(
            rec({
              max_new_tokens: field(fc.integer({ min: 1, max: 10 })),
              temperature: field(fc.double({ min: 0, max: 2, noNaN: true })),
              top_p: field(fc.double({ min: 0, max: 1, noNaN: true })),
              top_k: field(fc.integer({ min: -1, max: 5 })),
              stop_token_ids: field(fc.array(fc.integer({ min: 0, max: vocab - 1 }), { maxLength: 3 })),
              sampling_seed: field(fc.nat()),
              ignore_eos: field(fc.boolean()),
            }),
            fc.array(rec({ max_new_tokens: field(fc.integer({ min: 1, max: 6 })) }), { maxLength: 3 }),
          ),
        ),
        rid: field(fc.oneof(fc.string({ maxLength: 6 }), fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }))),
        top_logprobs_num: field(fc.integer({ min: 0, max: 4 })),
        return_logprob: field(fc.boolean()),
      }),
    },
    abort: { route: '/abort_request', arb: rec({ rid: field(fc.string({ maxLength: 8 })) }) },
    update_weights: {
      route: '/update_weights_from_disk',
      arb: rec({
        model_path: field(
          fc.constantFrom(
            join(roots.weights, 'good'),
            join(roots.weights, 'empty'),
            join(roots.weights, 'garbage'),
            join(roots.weights, 'missing'),
            roots.weights,
            roots.outside,
            '/etc',
            '/',
            '/proc/self',
            '.',
            join(roots.weights, '..', '..'),
            'relative/path',
          ),
        ),
      }),
    },
    create_session: {
      route: '/api/v1/create_session',
      arb: rec({
        sdk_version: field(fc.constant('0.24.1')),
        tags: field(fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 })),
        type: field(fc.constant('create_session')),
      }),
    },
    heartbeat: {
      route: '/api/v1/session_heartbeat',
      arb: rec({ session_id: field(fc.constantFrom('session-1', 'session-999')) }),
    },
    create_sampling_session: {
      route: '/api/v1/create_sampling_session',
      arb: rec({
        session_id: field(fc.constant('session-1')),
        sampling_session_seq_id: field(fc.nat(5)),
        base_model: field(fc.constant('nano')),
        model_path: field(fc.constant('tinker://nano/sampler_weights/x')),
      }),
    },
    asample: {
      route: '/api/v1/asample',
      arb: rec({
        sampling_session_id: field(fc.constant('sampling-2')),
        prompt: field(
          rec({
            chunks: field(
              fc.array(rec({ tokens: field(tokens), type: field(fc.constant('encoded_text')) }), {
                minLength: 1,
                maxLength: 2,
              }),
            ),
          }),
        ),
        num_samples: field(fc.integer({ min: 1, max: 4 })),
        sampling_params: field(
          rec({
            max_tokens: field(fc.integer({ min: 1, max: 10 })),
            temperature: field(fc.double({ min: 0, max: 2, noNaN: true })),
            top_p: field(fc.double({ min: 0, max: 1, noNaN: true })),
            top_k: field(fc.integer({ min: -1, max: 5 })),
            stop: field(fc.array(fc.integer({ min: 0, max: vocab - 1 }), { maxLength: 2 })),
            seed: field(fc.nat()),
          }),
        ),
      }),
    },
    create_model: {
      route: '/api/v1/create_model',
      arb: rec({
        session_id: field(fc.constant('session-1')),
        model_seq_id: field(fc.nat(3)),
        base_model: field(fc.constant('nano')),
        lora_config: hostile,
      }),
    },
    forward_backward: {
      route: '/api/v1/forward_backward',
      arb: rec({
        model_id: field(fc.constant('nano')),
        forward_backward_input: field(
          rec({
            data: field(fc.array(datum, { minLength: 1, maxLength: 3 })),
            loss_fn: field(fc.constantFrom('cross_entropy', 'importance_sampling', 'ppo')),
            loss_fn_config: field(
              rec({
                clip_low_threshold: field(fc.double({ min: 0.5, max: 1, noNaN: true })),
                clip_high_threshold: field(fc.double({ min: 1, max: 1.5, noNaN: true })),
              }),
            ),
          }),
        ),
      }),
    },
    forward: {
      route: '/api/v1/forward',
      arb: rec({
        model_id: field(fc.constant('nano')),
        forward_input: field(rec({ data: field(fc.array(datum, { minLength: 1, maxLength: 2 })) })),
      }),
    },
    optim_step: {
      route: '/api/v1/optim_step',
      arb: rec({
        model_id: field(fc.constant('nano')),
        adam_params: field(
          rec({
            learning_rate: field(fc.double({ min: 0, max: 1e-3, noNaN: true })),
            beta1: field(fc.double({ min: 0, max: 0.99, noNaN: true })),
            beta2: field(fc.double({ min: 0, max: 0.999, noNaN: true })),
            eps: field(fc.double({ min: 1e-12, max: 1e-6, noNaN: true })),
            weight_decay: field(fc.double({ min: 0, max: 0.1, noNaN: true })),
            grad_clip_norm: field(fc.double({ min: 0, max: 1, noNaN: true })),
          }),
        ),
      }),
    },
    save_for_sampler: {
      route: '/api/v1/save_weights_for_sampler',
      arb: rec({
        model_id: field(fc.constant('nano')),
        path: field(fc.constantFrom('s1', 'a/b', '..', 'tinker://nano/weights/x')),
      }),
    },
    save_weights: {
      route: '/api/v1/save_weights',
      arb: rec({
        model_id: field(fc.constant('nano')),
        path: field(fc.constantFrom('w1', 'w2', '..', '../x', 'tinker://nano/weights/w1')),
      }),
    },
    load_weights: {
      route: '/api/v1/load_weights',
      arb: rec({
        model_id: field(fc.constant('nano')),
        path: field(fc.constantFrom('w1', 'w2', 'never-saved', '..', 'tinker://nano/weights/w2')),
        optimizer: field(fc.boolean()),
      }),
    },
    retrieve_future: {
      route: '/api/v1/retrieve_future',
      arb: rec({ request_id: field(fc.oneof(fc.nat(50).map(String), fc.nat(50))) }),
    },
    raw: {
      route: '',
      arb: fc.record({
        route: fc.constantFrom(
          '/v1/completions',
          '/generate',
          '/abort_request',
          '/update_weights_from_disk',
          '/api/v1/asample',
          '/api/v1/forward_backward',
          '/api/v1/create_session',
          '/api/v1/retrieve_future',
          '/api/v1/nope',
          '/nope',
          '/health',
        ),
        text: fc.oneof(
          fc.string({ maxLength: 40 }),
          fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? ''),
          fc.constantFrom('{', '[]', 'null', '1', '"x"', '{"a":', '\u0000', '[[[[[[[[[[]]]]]]]]]]'),
        ),
      }),
    },
  };
}

/** Run `n` fuzz cases spread over every body (deterministic for a given seed). */
export interface FuzzOptions {
  seed?: number;
  /** A case answered later than this is a hang (a failure). */
  caseTimeoutMs?: number;
  /** Cases in flight at once (1 = one after another, deterministic). */
  concurrency?: number;
  /** Called with the server before the cases run (tests use it to break the server on purpose). */
  sabotage?: (server: ArborServer) => void;
}

export async function runServeFuzz(n: number, options: FuzzOptions = {}): Promise<FuzzReport> {
  const started = Date.now();
  const root = mkdtempSync(join(tmpdir(), 'arbor-serve-fuzz-'));
  const outside = mkdtempSync(join(tmpdir(), 'arbor-serve-fuzz-outside-'));
  saveCheckpoint(
    join(outside, 'ckpt'),
    await NanoModel.create(
      { vocabSize: new CharTokenizer().vocabSize, dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, contextLength: CONTEXT },
      { seed: 2 },
    ),
    new CharTokenizer(),
  );
  const { server, vocab, close } = await fuzzServer(root);
  options.sabotage?.(server);
  const report: FuzzReport = { cases: 0, byBody: {}, failures: 0, serve5xx: 0, statuses: {}, examples: [], wallMs: 0 };
  const limit = options.caseTimeoutMs ?? 10_000;
  const call = async (name: string, method: string, route: string, text: string | undefined) => {
    let timer: NodeJS.Timeout | undefined;
    let status: number;
    let body: unknown;
    try {
      const reply = await Promise.race([
        server.handleRequest(method, route, text),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${limit} ms`)), limit);
        }),
      ]);
      status = reply.status;
      body = reply.body;
    } catch (error) {
      status = -1;
      body = { thrown: (error as Error)?.message ?? String(error) };
    } finally {
      clearTimeout(timer);
    }
    report.cases++;
    report.byBody[name] = (report.byBody[name] ?? 0) + 1;
    report.statuses[status] = (report.statuses[status] ?? 0) + 1;
    const serverFuture = (body as { category?: unknown } | null)?.category === 'server';
    if (status >= 500 || serverFuture) report.serve5xx++;
    if (status >= 500 || status < 0 || serverFuture) {
      report.failures++;
      if (report.examples.length < 5)
        report.examples.push(
          `${method} ${route} ${String(text).slice(0, 300)} → ${status} ${JSON.stringify(body).slice(0, 300)}`,
        );
    }
    return { status, body };
  };
  try {
    // the Tinker state the bodies refer to: session-1, sampling-2 and the model
    await call('setup', 'POST', '/api/v1/create_session', JSON.stringify({ sdk_version: '0.24.1' }));
    await call(
      'setup',
      'POST',
      '/api/v1/create_sampling_session',
      JSON.stringify({ session_id: 'session-1', base_model: 'nano' }),
    );
    await call(
      'setup',
      'POST',
      '/api/v1/create_model',
      JSON.stringify({ session_id: 'session-1', base_model: 'nano' }),
    );
    const all = bodies(vocab, { weights: join(root, 'weights'), outside: join(outside, 'ckpt') });
    const names = Object.keys(all);
    const per = Math.ceil(n / names.length);
    const seed = options.seed ?? 17;
    const samples = names.map((name, i) => fc.sample(all[name].arb, { numRuns: per, seed: seed + i }));
    // one after another: interleave the bodies so that Tinker futures, sessions and weight loads meet
    // each other; concurrently: windows of the same body, so that requests race for the same resources
    const width = Math.max(1, options.concurrency ?? 1);
    const order: Array<[string, unknown]> = [];
    for (let k = 0; k < per; k += width) {
      for (let i = 0; i < names.length; i++)
        for (let j = k; j < Math.min(per, k + width); j++) order.push([names[i], samples[i][j]]);
    }
    const one = async ([name, value]: [string, unknown]) => {
      if (name === 'raw') {
        const { route, text } = value as { route: string; text: string };
        await call(name, route === '/health' ? 'GET' : 'POST', route, route === '/health' ? undefined : text);
        return;
      }
      const { status, body } = await call(name, 'POST', all[name].route, JSON.stringify(value));
      const id = (body as { request_id?: unknown } | null)?.request_id;
      if (status === 200 && typeof id === 'string' && name !== 'retrieve_future') {
        // fetch the future (bounded polling): a failed future must be the client's fault
        for (let tries = 0; tries < 200; tries++) {
          const r = await call(
            'retrieve_future',
            'POST',
            '/api/v1/retrieve_future',
            JSON.stringify({ request_id: id }),
          );
          if ((r.body as { type?: unknown } | null)?.type !== 'try_again') break;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      }
    };
    for (let k = 0; k < order.length && report.cases < n; k += width)
      await Promise.all(order.slice(k, k + width).map(one));
  } finally {
    await close();
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  }
  report.wallMs = Date.now() - started;
  return report;
}
