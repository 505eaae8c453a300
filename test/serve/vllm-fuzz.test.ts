/**
 * Fuzzing the vLLM routes `arbor serve` gained for Hugging Face models (the older routes have
 * testkit/reliability/serve-fuzz.ts): property-based bodies for /v1/completions (text prompts, stop
 * strings, echo, stream), /v1/chat/completions and /tokenize (hostile messages, tools, tool_choice and
 * template kwargs through the real Qwen3 chat template; replies parsed by the hermes tool-call parser),
 * /detokenize and the LoRA routes, answered in process.
 * No case may answer 5xx, throw or hang, and every error must be vLLM's envelope repeating the status.
 * A sabotaged server (a tokenizer that throws a plain error) must be caught.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { savePeftAdapter } from '../../src/engine/formats/peft.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import { loadServeEngine } from '../../src/serve/engine.js';
import { ArborServer } from '../../src/serve/server.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

let root: string;
let dir: string;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'arbor-vllm-fuzz-'));
  dir = tinyQwen3(root);
  const { model } = await loadHfModel(dir);
  const adapter = new LoraAdapter(model, { rank: 2, alpha: 4, targets: ['q_proj'] }, referenceKernels);
  adapter.initialise(1);
  savePeftAdapter(join(root, 'adapter'), adapter, 'tiny');
});
after(() => rmSync(root, { recursive: true, force: true }));

const hostile = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -3, max: 3 }),
  fc.double(),
  fc.constantFrom(0, -1, 1e300, 2 ** 53, 0.5),
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', '<|im_end|>', '{{ raise }}', '\u0000', '__proto__'),
  fc.array(fc.integer({ min: -2, max: 200 }), { maxLength: 6 }),
  fc.jsonValue({ maxDepth: 3 }),
);
const field = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ arbitrary: good, weight: 24 }, { arbitrary: hostile, weight: 1 });
const rec = (shape: Record<string, fc.Arbitrary<unknown>>, required: string[] = []) =>
  fc.record(shape, { requiredKeys: required as never[] });
const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom('12+34=', '<think>', '</tool_call>', '<|im_start|>user', 'é😀'),
);
const message = rec(
  {
    role: field(fc.constantFrom('system', 'user', 'assistant', 'tool', 'other')),
    content: field(
      fc.oneof(
        text,
        fc.constant(null),
        fc.array(rec({ type: field(fc.constant('text')), text: field(text) }, ['type', 'text']), { maxLength: 2 }),
      ),
    ),
    tool_calls: field(
      fc.array(
        rec(
          {
            type: field(fc.constant('function')),
            function: field(
              rec(
                {
                  name: field(fc.constantFrom('add', 'f')),
                  arguments: field(
                    fc.oneof(fc.constant('{"a":1}'), fc.dictionary(fc.string({ maxLength: 3 }), fc.integer())),
                  ),
                },
                ['name'],
              ),
            ),
          },
          ['function'],
        ),
        { maxLength: 2 },
      ),
    ),
    reasoning_content: field(text),
  },
  ['role', 'content'],
);
const messages = field(fc.array(message, { minLength: 1, maxLength: 4 }));
const tools = field(
  fc.array(
    rec(
      {
        type: field(fc.constant('function')),
        function: field(
          rec({ name: field(fc.constantFrom('add', 'sub')), parameters: field(fc.jsonValue({ maxDepth: 2 })) }, [
            'name',
          ]),
        ),
      },
      ['type', 'function'],
    ),
    { maxLength: 2 },
  ),
);
const sampling = {
  model: field(fc.constantFrom('tiny', 'tiny', 'tiny', 'tiny', 'a', 'missing')),
  n: field(fc.integer({ min: 1, max: 2 })),
  max_tokens: field(fc.integer({ min: 1, max: 2 })),
  temperature: field(fc.double({ min: 0, max: 2, noNaN: true })),
  top_p: field(fc.double({ min: 0, max: 1, noNaN: true })),
  top_k: field(fc.integer({ min: -1, max: 5 })),
  seed: field(fc.nat(100)),
  stop: field(fc.oneof(text, fc.array(text, { maxLength: 2 }))),
  stop_token_ids: field(fc.array(fc.nat(151700), { maxLength: 2 })),
  logprobs: field(fc.integer({ min: 0, max: 3 })),
  echo: field(fc.boolean()),
  stream: field(fc.boolean()),
  include_stop_str_in_output: field(fc.boolean()),
  return_token_ids: field(fc.boolean()),
  return_tokens_as_token_ids: field(fc.boolean()),
  ignore_eos: field(fc.boolean()),
};
const bodies: Record<string, { route: string; arb: fc.Arbitrary<unknown> }> = {
  completions: {
    route: '/v1/completions',
    arb: rec(
      {
        ...sampling,
        prompt: field(
          fc.oneof(text, fc.array(text, { minLength: 1, maxLength: 2 }), fc.array(fc.nat(151700), { maxLength: 6 })),
        ),
      },
      ['prompt'],
    ).map(streamOptions),
  },
  chat: {
    route: '/v1/chat/completions',
    arb: rec(
      {
        ...sampling,
        messages,
        tools,
        tool_choice: field(
          fc.constantFrom('none', 'auto', 'required', { type: 'function', function: { name: 'add' } }, 'any'),
        ),
        add_generation_prompt: field(fc.boolean()),
        continue_final_message: field(fc.boolean()),
        chat_template_kwargs: field(rec({ enable_thinking: field(fc.boolean()) })),
        max_completion_tokens: field(fc.integer({ min: 0, max: 2 })),
        top_logprobs: field(fc.integer({ min: 0, max: 3 })),
        logprobs: field(fc.boolean()),
      },
      ['messages'],
    ).map(streamOptions),
  },
  tokenize: {
    route: '/tokenize',
    arb: rec({
      prompt: field(text),
      messages,
      tools,
      add_generation_prompt: field(fc.boolean()),
      continue_final_message: field(fc.boolean()),
      add_special_tokens: field(fc.boolean()),
      return_token_strs: field(fc.boolean()),
      chat_template_kwargs: field(rec({ enable_thinking: field(fc.boolean()) })),
    }),
  },
  detokenize: {
    route: '/detokenize',
    arb: rec(
      { tokens: field(fc.array(fc.nat(151700), { maxLength: 6 })), model: field(fc.constantFrom('tiny', 'tiny', 'x')) },
      ['tokens'],
    ),
  },
  load: {
    route: '/v1/load_lora_adapter',
    arb: rec(
      {
        lora_name: field(fc.constantFrom('a', 'b', '')),
        lora_path: field(fc.constantFrom('ADAPTER', 'ADAPTER', 'ADAPTER', '/nonexistent', '/etc', '', '.')),
        load_inplace: field(fc.boolean()),
      },
      ['lora_name', 'lora_path'],
    ),
  },
  unload: {
    route: '/v1/unload_lora_adapter',
    arb: rec({ lora_name: field(fc.constantFrom('a', 'b', '')) }, ['lora_name']),
  },
};

/** stream_options only with stream: true (vLLM refuses it otherwise; that case is tested elsewhere). */
function streamOptions(body: Record<string, unknown>): Record<string, unknown> {
  return body.stream === true ? { ...body, stream_options: { include_usage: true } } : body;
}

/** Run `perBody` cases of every body; returns the statuses and up to 5 failing cases. */
async function fuzz(
  server: ArborServer,
  perBody: number,
  seed: number,
): Promise<{ statuses: Record<string, number>; failures: string[] }> {
  const statuses: Record<string, number> = {};
  const failures: string[] = [];
  for (const [name, { route, arb }] of Object.entries(bodies)) {
    for (const value of fc.sample(arb, { numRuns: perBody, seed: seed + name.length })) {
      const body = JSON.stringify(value).replace('"ADAPTER"', JSON.stringify(join(root, 'adapter')));
      let timer: NodeJS.Timeout | undefined;
      let verdict: string | undefined;
      try {
        const reply = await Promise.race([
          server.handleRequest('POST', route, body),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('no answer in 10 s')), 10_000);
          }),
        ]);
        statuses[reply.status] = (statuses[reply.status] ?? 0) + 1;
        const error = (reply.body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
        if (reply.status >= 500) verdict = `${reply.status} ${JSON.stringify(reply.body).slice(0, 300)}`;
        else if (reply.status >= 400 && (typeof error?.message !== 'string' || error.code !== reply.status))
          verdict = `not vLLM's envelope: ${JSON.stringify(reply.body)}`;
        else if (typeof reply.body === 'string' && reply.body.includes('"error"'))
          verdict = `an error inside a stream: ${String(reply.body).slice(0, 300)}`;
      } catch (error) {
        verdict = `threw ${(error as Error).message}`;
      } finally {
        clearTimeout(timer);
      }
      if (verdict && failures.length < 5) failures.push(`${route} ${body.slice(0, 300)} → ${verdict}`);
    }
  }
  return { statuses, failures };
}

test(
  "vLLM routes fuzz: hostile completions, chats, templates, tokenize and LoRA bodies never answer 5xx, and errors are vLLM's envelope",
  { timeout: 240_000 },
  async () => {
    const engine = await loadServeEngine({ checkpoint: dir, name: 'tiny', enableLora: true });
    // with vLLM's --enable-auto-tool-choice --tool-call-parser hermes: a chat with tools is parsed, not refused
    const toolCalls = { autoToolChoice: true, parser: 'hermes' as const };
    const limits = { ...engine.options.limits, maxN: 2 };
    const server = new ArborServer({ ...engine.options, limits, toolCalls });
    const r = await fuzz(server, 100, 7);
    console.log(`# vLLM routes fuzz: statuses ${JSON.stringify(r.statuses)}`);
    assert.deepEqual(r.failures, []);
    assert.ok(
      r.statuses['200'] > 120 && r.statuses['400'] > 120 && r.statuses['404'] > 50,
      `the bodies reach past validation: ${JSON.stringify(r.statuses)}`,
    );
    // the harness catches a fault: a tokenizer that throws a plain error on some text gives 500s
    const broken = new ArborServer({
      ...engine.options,
      tokenizer: {
        ...engine.options.tokenizer!,
        encode: (t, s) => {
          if (t.includes('+')) throw new TypeError('tokenizer fault');
          return engine.options.tokenizer!.encode(t, s);
        },
      },
    });
    const b = await fuzz(broken, 40, 8);
    assert.ok(
      b.failures.some((f) => /→ 500 .*tokenizer fault/.test(f)),
      b.failures.join('\n'),
    );
  },
);
