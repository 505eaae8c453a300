/**
 * `arbor serve --checkpoint <dir> [options]`: a nano checkpoint or a Hugging Face model directory over
 * HTTP with vLLM's conventions (serve/engine.ts assembles it, serve/server.ts serves it). The weights
 * must be finite (a checkpoint with NaN/Inf values is refused); `/update_weights_from_disk` loads only
 * from `--weights-root` directories (default: the checkpoint's parent directory); requests are bounded
 * by `--max-n`, `--max-batch-tokens`, `--max-concurrent`, `--max-request-bytes` (the body's size, refused
 * before it is parsed) and the model's context length; completions
 * stop at the model's end ids unless a request sets `ignore_eos`. `--lora-modules` takes several
 * values after one flag (NAME=DIR or JSON), as vLLM's does.
 */
import { ArborError } from '../core/errors.js';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { loadServeEngine } from '../serve/engine.js';
import { DEFAULT_LIMITS } from '../serve/limits.js';
import { parseLoraModules } from '../serve/vllm/lora.js';
import { CODEC_INLINE, PARSE_INLINE_BYTES } from '../serve/request-worker.js';
import { ArborServer } from '../serve/server.js';
import { TOOL_CALL_PARSERS, type ToolCallParserName } from '../serve/tool-calls.js';
import type { ToolCallSettings } from '../serve/vllm/chat.js';
import { helpText, parseCommand, type CommandSpec } from './args.js';

/** A flag with a value. */
const value = (placeholder: string, doc: string) => ({ type: 'string' as const, value: placeholder, doc });
/** A boolean flag. */
const on = (doc: string) => ({ type: 'boolean' as const, doc });

export const SERVE: CommandSpec = {
  name: 'serve',
  positionals: '',
  maxPositionals: 0,
  summary:
    'Serve a nano checkpoint or a Hugging Face model directory (config.json with `architectures`: Llama, ' +
    "Qwen2, Qwen3) over HTTP on 127.0.0.1, with vLLM's conventions: OpenAI /v1/completions and " +
    '/v1/chat/completions (text or token ids, SSE streaming, echo + logprobs), /v1/models, /tokenize, /detokenize, ' +
    'LoRA adapters; SGLang /generate and /update_weights_from_disk; the Tinker API under /api/v1/* (LoRA training ' +
    'of HF models, sampler-weight archives); and /health.',
  flags: {
    checkpoint: value('DIR', 'the nano checkpoint or Hugging Face model directory to serve (required)'),
    port: value('N', 'TCP port (default 8000; 0 = any free port)'),
    host: value('HOST', 'address to listen on (default 127.0.0.1)'),
    name: value(
      'NAME',
      'model name for /v1/models and `model` (vLLM --served-model-name; default arbor-nano, or the ' +
        'HF directory as given)',
    ),
    'max-model-len': value('N', "cap the context (prompt + completion) below the model's max_position_embeddings"),
    threads: value('N', `kernel threads, 1 to ${availableParallelism()} (engine.threads; default 1)`),
    'skip-tokenizer-init': on(
      'serve without a tokenizer: token-id prompts only, no text out; logprobs need ' + 'return_tokens_as_token_ids',
    ),
    'enable-lora': on(
      "LoRA adapters: a request's `model` may name one, and the runtime routes /v1/load_lora_adapter " +
        'and /v1/unload_lora_adapter are on (vLLM needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True for those)',
    ),
    'lora-modules': value(
      'NAME=DIR ...',
      'PEFT adapters served from the start: NAME=DIR items or JSON ' +
        '{"name","path","base_model_name"} (implies --enable-lora)',
    ),
    'max-lora-rank': value('N', 'largest adapter rank served (default 16, as vLLM)'),
    'max-loras': value(
      'N',
      'adapters held in memory at once; others are read again from their directory when used ' + '(default 1, as vLLM)',
    ),
    'state-dir': value(
      'DIR',
      'where Tinker save_weights and sampler weights (LoRA adapters) are kept (default ' + '.arbor-serve-state)',
    ),
    'weights-root': value(
      'DIR[,DIR...]',
      'directories /update_weights_from_disk may load from (nano checkpoints; ' +
        "default: the checkpoint's parent directory)",
    ),
    'enable-auto-tool-choice': on(
      'parse tool calls out of chat replies into OpenAI `tool_calls` (tool_choice auto, as vLLM; needs --tool-call-parser)',
    ),
    'tool-call-parser': value(
      'NAME',
      `the model's tool-call format: ${TOOL_CALL_PARSERS.join(' or ')} (Qwen2/Qwen3/Hermes <tool_call> JSON, ` +
        'Llama 3.1 JSON calls)',
    ),
    'max-n': value('N', `largest n / num_samples of one request (default ${DEFAULT_LIMITS.maxN})`),
    'max-batch-tokens': value(
      'N',
      'largest n × max_tokens of one request, answered 413 above ' + `(default ${DEFAULT_LIMITS.maxBatchTokens})`,
    ),
    'max-concurrent': value(
      'N',
      'sampling requests running at once, answered 429 above ' + `(default ${DEFAULT_LIMITS.maxConcurrent})`,
    ),
    'max-request-bytes': value(
      'N',
      'largest request body, answered 413 above by its size alone, before it is parsed ' +
        `(default ${DEFAULT_LIMITS.maxRequestBytes}; bodies over ${PARSE_INLINE_BYTES} bytes are parsed, and prompt ` +
        `texts over ${CODEC_INLINE} characters encoded, off the event loop)`,
    ),
    'slice-tokens': value(
      'N',
      'decoded tokens per sampler call before /health and other requests get a turn ' +
        `(default ${DEFAULT_LIMITS.sliceTokens}; a request of n × max_tokens up to this is one call, exactly as the ` +
        'engine samples)',
    ),
  },
};

/** Take `--lora-modules A=x B=y ...` (every value up to the next flag) out of argv, as vLLM's nargs='+'. */
export function takeLoraModules(argv: readonly string[]): { rest: string[]; items: string[] } {
  const rest: string[] = [];
  const items: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith('--lora-modules=')) {
      items.push(a.slice('--lora-modules='.length));
    } else if (a === '--lora-modules') {
      const start = items.length;
      while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) items.push(argv[++i]);
      if (items.length === start) throw new ArborError('serve: --lora-modules needs at least one NAME=DIR value');
    } else {
      rest.push(a);
    }
  }
  return { rest, items };
}

export async function serveCommand(argv: string[]): Promise<number> {
  const { rest, items } = takeLoraModules(argv);
  const f = parseCommand(rest, SERVE);
  if (f.help) return (void process.stdout.write(helpText(SERVE)), 0);
  const checkpoint = f.string('checkpoint');
  if (!checkpoint) throw new ArborError('serve: --checkpoint <dir> is required (arbor serve --help lists the options)');
  const port = f.number('port', 8000, { integer: true, min: 0, max: 65535 });
  const host = f.string('host') ?? '127.0.0.1';
  const limits = {
    maxN: f.number('max-n', DEFAULT_LIMITS.maxN, { integer: true, min: 1, max: 1_000_000 }),
    maxBatchTokens: f.number('max-batch-tokens', DEFAULT_LIMITS.maxBatchTokens, { integer: true, min: 1, max: 1e9 }),
    maxConcurrent: f.number('max-concurrent', DEFAULT_LIMITS.maxConcurrent, { integer: true, min: 1, max: 100_000 }),
    sliceTokens: f.number('slice-tokens', DEFAULT_LIMITS.sliceTokens, { integer: true, min: 1, max: 1e9 }),
    maxRequestBytes: f.number('max-request-bytes', DEFAULT_LIMITS.maxRequestBytes, {
      integer: true,
      min: 1024,
      max: 2 ** 31 - 1,
    }),
  };
  // the tool-call flags are checked before the model loads: a wrong one fails at once
  const toolCalls = toolCallSettings(f.bool('enable-auto-tool-choice'), f.string('tool-call-parser'));
  const roots = f
    .string('weights-root')
    ?.split(',')
    .filter(Boolean)
    .map((r) => resolve(r));
  const engine = await loadServeEngine({
    checkpoint,
    name: f.string('name'),
    maxModelLen: f.number('max-model-len', undefined, { integer: true, min: 2, max: 1 << 24 }),
    threads: f.number('threads', undefined, { integer: true, min: 1, max: availableParallelism() }),
    skipTokenizerInit: f.bool('skip-tokenizer-init'),
    enableLora: f.bool('enable-lora'),
    loraModules: parseLoraModules(items),
    maxLoraRank: f.number('max-lora-rank', undefined, { integer: true, min: 1, max: 4096 }),
    maxLoras: f.number('max-loras', undefined, { integer: true, min: 1, max: 1024 }),
    stateDir: f.string('state-dir') ?? '.arbor-serve-state',
    weightsRoots: roots,
  });
  if (engine.ignoredDefaults.length) {
    const ignored = engine.ignoredDefaults.join(', ');
    console.log(`arbor serve: warning: generation_config.json sets ${ignored}; the embedded sampler does not apply it`);
  }
  const server = new ArborServer({ ...engine.options, toolCalls, limits: { ...engine.options.limits, ...limits } });
  const url = await server.listen(port, host);
  const routes =
    '/v1/completions /v1/chat/completions /v1/models /tokenize /detokenize /generate ' +
    '/api/v1/* (Tinker SDK 0.3–0.24.1 JSON) /health';
  const adapters = engine.options.lora
    ?.cards()
    .map((c) => c.name)
    .join(', ');
  const lora = engine.options.lora ? `; LoRA adapters: ${adapters || 'none yet'} (runtime loading on)` : '';
  const weights = engine.options.weightsRoots ? `; weights from ${engine.options.weightsRoots.join(', ')}` : '';
  const served = `${engine.description} as "${server.options.modelName}"`;
  const tools = toolCalls.parser ? `; tool calls parsed (${toolCalls.parser})` : '';
  console.log(`arbor serve: ${served} at ${url}  [${routes}]${weights}${lora}${tools}`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}

/** --enable-auto-tool-choice and --tool-call-parser, checked as vLLM checks them at start. */
export function toolCallSettings(auto: boolean, parser: string | undefined): ToolCallSettings {
  if (parser !== undefined && !(TOOL_CALL_PARSERS as readonly string[]).includes(parser))
    throw new ArborError(`serve: --tool-call-parser ${parser}: known parsers are ${TOOL_CALL_PARSERS.join(', ')}`);
  if (auto && parser === undefined)
    throw new ArborError('serve: --enable-auto-tool-choice needs --tool-call-parser (hermes or llama3_json)');
  return { autoToolChoice: auto, parser: parser as ToolCallParserName | undefined };
}
