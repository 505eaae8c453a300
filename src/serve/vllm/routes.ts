/**
 * The vLLM routes of `arbor serve`: `/v1/completions` (here) and
 * `/v1/chat/completions` (chat.ts), non-streamed and SSE-streamed, `/v1/models`, `/tokenize`,
 * `/detokenize`, and with `--enable-lora` `/v1/load_lora_adapter` / `/v1/unload_lora_adapter`
 * (plain-text replies). Bodies follow vllm-project/vllm@cc139d8 openai/completion/serving.py, @343baca
 * serve/tokenize/protocol.py, @4fe4500 openai/models/serving.py. A request's `model` is the served name
 * or an adapter's (the reply names it); any other is 404. Not served: prompt_logprobs without echo,
 * beam search, penalties, structured output (each a 400 naming the field).
 */
import { DataError } from '../../core/errors.js';
import type { ChatMessage, SampleRequest, SampleUsage, Sampler } from '../../engine/types.js';
import type { GenerationDefaults } from '../../engine/open.js';
import { generate, generateStream, type ChoiceDelta, type ChoiceOutput, type Generation } from './generation.js';
import type { SampleGuard } from '../limits.js';
import type { LoraRegistry } from './lora.js';
import type { RequestWorker } from '../request-worker.js';
import { completionLogprobs, type LogprobEntry, type ModelDefaults, type ServeTokenizer } from '../text.js';
import { BadRequest, boundedInt, NotFound, optBool, tokenList, type ServeReply } from '../validate.js';
import type { AnsweredCall, CallHooks } from '../hooks.js';
import { chatCompletion, type ChatHost, type ToolCallSettings } from './chat.js';
import { chatMessages, chatTools, maxTokensField, promptInputs, samplingFields } from './params.js';
import { templateFields, type PromptInput, type SamplingFields } from './params.js';
import type { CompletionChoice, CompletionResponse } from '../../wire/openai-completions.js';
import { addUsage, emptyUsage, modelCard, now, sse, sseStream, uid, wireUsage } from './wire.js';

/** vLLM's text when the server runs without a tokenizer (`--skip-tokenizer-init`). */
const NO_TOKENIZER = 'Tokenizer not available when `skip_tokenizer_init=True`';

export interface VllmRoutesOptions {
  modelName: string;
  /** /v1/models `root` of the base model (the checkpoint directory). */
  modelRoot: string;
  sampler: Sampler;
  guard: SampleGuard;
  tokenizer?: ServeTokenizer;
  /** Encodes prompt texts (long ones off the event loop, with its own copy of `tokenizer`). */
  work: RequestWorker;
  /** Without a tokenizer: decode output ids (older embedders); absent too = no text at all. */
  decode?: (ids: number[]) => string;
  /** --skip-tokenizer-init: logprob token names need return_tokens_as_token_ids, as in vLLM. */
  skipTokenizerInit: boolean;
  defaults: ModelDefaults;
  lora?: LoraRegistry;
  /** Tool-call parsing of chat replies (vLLM --enable-auto-tool-choice, --tool-call-parser); default off. */
  toolCalls?: ToolCallSettings;
}

/** What the choices and chunks of one completions reply share. */
interface CompletionShape {
  id: string;
  created: number;
  model: string;
  prompts: PromptInput[];
  echo: boolean;
  /** echo with max_tokens 0: the prompt only (one hidden token is sampled and counted, as vLLM does). */
  echoOnly: boolean;
  returnIds: boolean;
  /** `logprobs` (undefined: none asked) and the token names. */
  k: number | undefined;
  name: ((id: number) => string) | undefined;
  /** Per prompt, its scored tokens (echo + logprobs). */
  scored: Array<() => Promise<LogprobEntry[]>> | undefined;
  n: number;
}

/** Field names of one request, for the 400 messages. */
interface GenerationFields {
  prompt: string;
  maxTokens: string;
}

/** A sampler that scores prompts (NanoSampler.scorePrompt): log p(token t | tokens < t), entry 0 null. */
interface PromptScorer {
  scorePrompt(
    tokens: number[],
    topK: number,
  ): {
    logprobs: Array<number | null>;
    top: Array<Array<[number, number]> | null>;
  };
}

export class VllmRoutes implements ChatHost {
  readonly toolCalls: ToolCallSettings;
  /** Chat replies whose tool-call markup did not parse (sent back as content). */
  toolParseFailures = 0;

  constructor(private readonly o: VllmRoutesOptions) {
    this.toolCalls = o.toolCalls ?? { autoToolChoice: false };
  }

  get guard(): SampleGuard {
    return this.o.guard;
  }

  get generationDefaults(): GenerationDefaults {
    return this.o.defaults.generation;
  }

  private get limits() {
    return this.o.guard.limits;
  }

  /** The request's `model`: an adapter's name, the served name (or none), else 404 as vLLM answers. */
  target(model: unknown): { name: string; sampler: Sampler } {
    const lora = this.o.lora;
    if (typeof model === 'string' && lora?.has(model)) return { name: model, sampler: lora.sampler(model)! };
    if (model === undefined || model === null || model === '' || model === this.o.modelName) {
      return { name: this.o.modelName, sampler: this.o.sampler };
    }
    throw new NotFound(`The model \`${typeof model === 'string' ? model : JSON.stringify(model)}\` does not exist.`);
  }

  models(): unknown {
    const base = modelCard(this.o.modelName, this.o.modelRoot, null, this.limits.contextLength ?? null);
    const adapters = (this.o.lora?.cards() ?? []).map((c) => modelCard(c.name, c.path, c.parent, null));
    return { object: 'list', data: [base, ...adapters] };
  }

  /** Output text of ids (skip_special_tokens), when the server has any decoder. */
  private textDecoder(skipSpecial: boolean): ((ids: number[]) => string) | undefined {
    const { tokenizer, decode } = this.o;
    if (tokenizer) return (ids) => tokenizer.decode(ids, skipSpecial);
    return decode;
  }

  /** The string of one token in a logprobs object: `token_id:<id>`, or the token decoded (special tokens kept). */
  tokenName(asIds: boolean): (id: number) => string {
    const { tokenizer, decode } = this.o;
    if (asIds) return (id) => `token_id:${id}`;
    if (tokenizer) return (id) => tokenizer.decode([id], false);
    if (this.o.skipTokenizerInit) {
      throw new BadRequest('field "skip_tokenizer_init": Unable to get tokenizer because `skip_tokenizer_init=True`');
    }
    return decode ? (id) => decode([id]) : (id) => `token_id:${id}`;
  }

  /** The engine request of one prompt; stop tokens are the request's plus the end ids unless ignore_eos. */
  generation(ids: number[], s: SamplingFields, maxTokens: number, k: number, fields: GenerationFields): Generation {
    const eos = s.ignoreEos ? [] : this.o.defaults.eosIds.filter((id) => !s.stopTokenIds.includes(id));
    const stops = [...s.stopTokenIds, ...eos];
    const request: SampleRequest = {
      tokens: ids,
      n: s.n,
      maxTokens,
      temperature: s.temperature,
      topP: s.topP,
      topK: s.topK,
      seed: s.seed,
      stopTokens: stops.length ? stops : undefined,
      topLogprobs: k,
    };
    const perContinuation = this.o.guard.check(request, { ...fields, n: 'n' });
    const decode = this.textDecoder(s.skipSpecial);
    if (s.stop.length && !decode) {
      throw new BadRequest(`field "stop": stop strings need the tokenizer (${NO_TOKENIZER})`);
    }
    const text = decode && { decode, stop: s.stop, includeStop: s.includeStop };
    return { request, perContinuation, stopTokenIds: s.stopTokenIds, text };
  }

  /** Check the request's whole budget and take a concurrency slot (413 / 429 before any work). */
  admit(gens: Generation[], what: string): () => void {
    const total = gens.reduce((sum, g) => sum + (g.request.n ?? 1) * g.perContinuation, 0);
    this.o.guard.checkBudget(total, what);
    return this.o.guard.acquire();
  }

  async completions(b: Record<string, unknown>, signal?: AbortSignal, hooks?: CallHooks): Promise<ServeReply> {
    const target = this.target(b.model);
    const stream = optBool(b.stream, 'stream', false);
    if (b.stream_options !== undefined && b.stream_options !== null && !stream) {
      throw new BadRequest('field "stream_options": Stream options can only be defined when `stream=True`.');
    }
    const echo = optBool(b.echo, 'echo', false);
    const k =
      b.logprobs === undefined || b.logprobs === null
        ? undefined
        : boundedInt(b.logprobs, 'logprobs', 0, 0, this.limits.maxLogprobs);
    let s = samplingFields(b, this.o.defaults.generation, this.limits.maxN);
    const asIds = optBool(b.return_tokens_as_token_ids, 'return_tokens_as_token_ids', false);
    const returnIds = optBool(b.return_token_ids, 'return_token_ids', false);
    const addSpecial = optBool(b.add_special_tokens, 'add_special_tokens', true);
    const tokenizer = this.o.tokenizer;
    const encode = tokenizer && ((t: string, field: string) => this.encodeText(t, addSpecial, field));
    const tooLong = (length: number, field: string) => this.o.guard.promptLengthProblem(length, field);
    const prompts = await promptInputs(b.prompt, encode, `field "prompt": ${NO_TOKENIZER}`, tooLong);
    // echo without generation: vLLM samples one hidden token (counted in usage) and returns the prompt only
    let maxTokens = maxTokensField(b.max_tokens, 'max_tokens', 16, this.o.defaults.generation, echo ? 0 : 1);
    if (hooks) {
      if (echo) throw new BadRequest('field "echo": the agent gateway samples continuations only (echo is off)');
      ({ sampling: s, maxTokens } = hooks.policy(s, maxTokens));
    }
    const echoOnly = echo && maxTokens === 0;
    const name = k === undefined ? undefined : this.tokenName(asIds);
    const gens = prompts.map((p, i) => {
      const fields = { prompt: prompts.length > 1 ? `prompt[${i}]` : 'prompt', maxTokens: 'max_tokens' };
      return this.generation(p.ids, s, echoOnly ? 1 : maxTokens, k ?? 0, fields);
    });
    const scored =
      echo && k !== undefined ? gens.map((g) => this.scorer(target.sampler, g.request.tokens, k)) : undefined;
    const what =
      gens.length === 1
        ? `n × max_tokens = ${s.n} × ${gens[0].perContinuation}`
        : `${gens.length} prompts × n = ${s.n}`;
    const release = this.admit(gens, what);
    const c: CompletionShape = {
      id: `cmpl-${uid()}`,
      created: now(),
      model: target.name,
      prompts,
      echo,
      echoOnly,
      returnIds,
      k,
      name,
      scored,
      n: s.n,
    };
    if (stream) {
      const options = b.stream_options as { include_usage?: unknown } | null | undefined;
      const includeUsage = optBool(options?.include_usage, 'stream_options.include_usage', false);
      const events = this.completionEvents(target.sampler, gens, c, includeUsage, release, signal, hooks);
      return { status: 200, body: null, events };
    }
    try {
      const choices: CompletionChoice[] = [];
      const usage = emptyUsage();
      for (let i = 0; i < gens.length; i++) {
        const out = await generate(target.sampler, this.o.guard, gens[i], signal);
        addUsage(usage, out.usage);
        hooks?.record(completionRecord(gens[i], out.choices, out.usage, target.sampler));
        const promptEntries = await scored?.[i]();
        for (const o of out.choices) {
          choices.push({ index: choices.length, ...this.completionChoice(c, i, o, promptEntries) });
        }
      }
      const body = {
        id: c.id,
        object: 'text_completion',
        created: c.created,
        model: c.model,
        choices,
        service_tier: null,
        system_fingerprint: null,
        usage: wireUsage(usage, true),
        kv_transfer_params: null,
      } satisfies CompletionResponse;
      return { status: 200, body };
    } finally {
      release();
    }
  }

  /** Log-probs of a prompt's tokens under `sampler` (entry 0 null), scored while the weights are shared. */
  private scorer(sampler: Sampler, ids: number[], k: number): () => Promise<LogprobEntry[]> {
    if (typeof (sampler as Partial<PromptScorer>).scorePrompt !== 'function') {
      const why = 'echo with logprobs needs the embedded engine (this sampler cannot score prompts)';
      throw new BadRequest(`field "echo": ${why}`);
    }
    return () =>
      this.o.guard.gate.shared(async () => {
        const r = (sampler as unknown as PromptScorer).scorePrompt(ids, k);
        return ids.map((id, t) => ({ id, logprob: r.logprobs[t], top: r.top[t] }));
      });
  }

  /** One choice of a completions reply, or of a streamed chunk (`echoNow`: this chunk carries the echo). */
  private completionChoice(
    c: CompletionShape,
    prompt: number,
    o: ChoiceOutput | ChoiceDelta,
    promptEntries?: LogprobEntry[],
    echoNow = c.echo,
    offset = 0,
  ) {
    const p = c.prompts[prompt];
    let text = o.text;
    let entries: LogprobEntry[] = o.tokens.map((id, t) => ({ id, logprob: o.logprobs[t], top: o.top?.[t] ?? [] }));
    if (echoNow) {
      // vLLM: the echoed text is the prompt as given (or decoded); none with return_token_ids
      const promptText = c.returnIds ? '' : (p.text ?? this.textDecoder(false)?.(p.ids) ?? '');
      const promptLog = promptEntries ?? p.ids.map((id) => ({ id, logprob: null, top: null }));
      text = c.echoOnly ? promptText : promptText + o.text;
      entries = c.echoOnly ? promptLog : [...promptLog, ...entries];
    }
    return {
      text,
      logprobs: c.k === undefined ? null : completionLogprobs(entries, c.k, c.name!, offset),
      finish_reason: o.finishReason,
      stop_reason: o.stopReason,
      token_ids: c.returnIds ? o.tokens : null,
      prompt_logprobs: null,
      prompt_token_ids: c.returnIds ? p.ids : null,
    };
  }

  /** SSE of a streamed completion: one chunk per continuation per segment, the usage chunk, [DONE]. */
  private async *completionEvents(
    sampler: Sampler,
    gens: Generation[],
    c: CompletionShape,
    includeUsage: boolean,
    release: () => void,
    signal?: AbortSignal,
    hooks?: CallHooks,
  ): AsyncGenerator<string> {
    const head = { id: c.id, object: 'text_completion', created: c.created, model: c.model };
    const self = this;
    // the gateway's record of the prompt being streamed (recorded when it ends, or when the client leaves)
    let open: { g: Generation; outputs: ChoiceOutput[]; usage: SampleUsage } | undefined;
    const flush = () => {
      if (open && hooks) hooks.record(completionRecord(open.g, open.outputs, open.usage, sampler));
      open = undefined;
    };
    try {
      yield* sseStream(head, includeUsage, release, async function* (usage) {
        for (let i = 0; i < gens.length; i++) {
          const promptEntries = await c.scored?.[i]();
          const started = new Set<number>();
          const n = gens[i].request.n ?? 1;
          open = { g: gens[i], outputs: Array.from({ length: n }, () => emptyOutput()), usage: emptyUsage() };
          const run = generateStream(sampler, self.o.guard, gens[i], signal);
          for (let step = await run.next(); ; step = await run.next()) {
            if (step.done) {
              addUsage(usage, step.value);
              addUsage(open.usage, step.value);
              break;
            }
            for (const d of step.value) accumulate(open.outputs[d.choice], d);
            yield* self.completionDeltas(c, i, step.value, started, promptEntries, head);
          }
          flush();
        }
      });
    } finally {
      flush();
    }
  }

  /** The chunks of one streamed segment: one per continuation it advanced. */
  private *completionDeltas(
    c: CompletionShape,
    i: number,
    deltas: ChoiceDelta[],
    started: Set<number>,
    promptEntries: LogprobEntry[] | undefined,
    head: Record<string, unknown>,
  ): Generator<string> {
    for (const d of deltas) {
      const first = !started.has(d.choice);
      started.add(d.choice);
      const echoNow = c.echo && first;
      const choice = this.completionChoice(c, i, d, promptEntries, echoNow, echoNow ? 0 : d.textOffset);
      // vLLM sends prompt_token_ids with a continuation's first chunk only
      if (!first) choice.prompt_token_ids = null;
      yield sse({ ...head, choices: [{ index: i * c.n + d.choice, ...choice }], usage: null });
    }
  }

  chat(b: Record<string, unknown>, signal?: AbortSignal, hooks?: CallHooks): Promise<ServeReply> {
    return chatCompletion(this, b, signal, hooks);
  }

  /** Ids of text a chat template writes (a forced tool-call prefix): special tokens parsed, nothing added. */
  encodeTemplateText(text: string): number[] {
    const tokenizer = this.o.tokenizer;
    if (!tokenizer) throw new BadRequest(`field "tool_choice": ${NO_TOKENIZER}`);
    return tokenizer.encode(text, false);
  }

  /**
   * The ids of a prompt text, encoded off the event loop when long; a 400 naming `field` when they are
   * over `limit` (default the longest prompt a sampling request may have), as the guard would refuse them.
   */
  private async encodeText(
    text: string,
    addSpecial: boolean,
    field: string,
    limit = this.o.guard.promptLimit,
  ): Promise<number[]> {
    const encoded = await this.o.work.encode(text, addSpecial, limit);
    if ('ids' in encoded) return encoded.ids;
    const why = this.o.guard.promptLengthProblem(encoded.count, field);
    throw new BadRequest(why ?? `field "${field}": ${encoded.count} tokens exceed the limit of ${limit}`);
  }

  /** The prompt ids of a chat: the template rendered (messages, tools, options), then encoded. */
  async renderChat(
    b: Record<string, unknown>,
    messages: ChatMessage[] = chatMessages(b.messages),
    limit?: number,
  ): Promise<number[]> {
    const tokenizer = this.o.tokenizer;
    if (!tokenizer) throw new BadRequest(`field "messages": ${NO_TOKENIZER}`);
    if (!tokenizer.chat) {
      const why = 'you must provide a chat template if the tokenizer does not define one';
      throw new BadRequest(`field "messages": this model's tokenizer has no chat template (${why})`);
    }
    const tools = chatTools(b.tools);
    const { addGenerationPrompt, continueFinalMessage, kwargs } = templateFields(b);
    let rendered: string;
    try {
      rendered = tokenizer.chat(messages, { tools, addGenerationPrompt, continueFinalMessage, kwargs });
    } catch (error) {
      // a template that fails to render is the request's fault (vLLM: jinja2.TemplateError → 400)
      if (error instanceof DataError) throw new BadRequest(`field "messages": ${error.message}`, { cause: error });
      throw error;
    }
    return this.encodeText(rendered, optBool(b.add_special_tokens, 'add_special_tokens', false), 'messages', limit);
  }

  /**
   * POST /tokenize: `prompt` (add_special_tokens default true) or `messages` (false). Not bounded by the
   * context (the reply's max_model_len tells the client), only by the server's longest prompt.
   */
  async tokenize(b: Record<string, unknown>): Promise<unknown> {
    this.target(b.model);
    const tokenizer = this.o.tokenizer;
    if (!tokenizer) throw new BadRequest(`field "prompt": ${NO_TOKENIZER}`);
    const limit = this.limits.maxPromptTokens;
    let ids: number[];
    if (b.messages !== undefined) {
      ids = await this.renderChat(b, undefined, limit);
    } else {
      if (typeof b.prompt !== 'string') throw new BadRequest('field "prompt" must be a string (or send "messages")');
      ids = await this.encodeText(b.prompt, optBool(b.add_special_tokens, 'add_special_tokens', true), 'prompt', limit);
    }
    const strings = optBool(b.return_token_strs, 'return_token_strs', false);
    const tokenStrs = strings ? ids.map((id) => tokenizer.tokenString?.(id) ?? tokenizer.decode([id], false)) : null;
    return { count: ids.length, max_model_len: this.limits.contextLength ?? null, tokens: ids, token_strs: tokenStrs };
  }

  /** POST /detokenize: `tokens` → `{prompt}` (special tokens kept, as transformers' decode); long lists off the event loop. */
  async detokenize(b: Record<string, unknown>): Promise<unknown> {
    this.target(b.model);
    const tokenizer = this.o.tokenizer;
    if (!tokenizer) throw new BadRequest(`field "tokens": ${NO_TOKENIZER}`);
    const tokens = tokenList(b.tokens, 'tokens');
    const V = this.limits.vocabSize;
    const bad = V === undefined ? -1 : tokens.findIndex((t) => t >= V);
    if (bad >= 0) {
      const why = `token id ${tokens[bad]} at position ${bad} is outside the vocabulary of ${V}`;
      throw new BadRequest(`field "tokens": ${why}`);
    }
    return { prompt: await this.o.work.decode(tokens, false) };
  }

  /** POST /v1/load_lora_adapter: vLLM's plain-text success reply. */
  loadLora(b: Record<string, unknown>): ServeReply {
    const lora = this.loraRoutes();
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    const path = typeof b.lora_path === 'string' ? b.lora_path : '';
    lora.load(name, path, { inplace: optBool(b.load_inplace, 'load_inplace', false) });
    return textReply(`Success: LoRA adapter '${name}' added successfully.`);
  }

  /** POST /v1/unload_lora_adapter. */
  unloadLora(b: Record<string, unknown>): ServeReply {
    const lora = this.loraRoutes();
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    lora.unload(name);
    return textReply(`Success: LoRA adapter '${name}' removed successfully.`);
  }

  private loraRoutes(): LoraRegistry {
    if (!this.o.lora) {
      const how = 'start arbor serve with --enable-lora (vLLM: VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)';
      throw new NotFound(`runtime LoRA updating is off: ${how}`);
    }
    return this.o.lora;
  }
}

/** vLLM's LoRA routes answer `Response(content=str)`: plain text, no JSON. */
function textReply(text: string): ServeReply {
  return { status: 200, body: null, raw: { contentType: 'text/plain; charset=utf-8', data: text } };
}

/** A continuation being streamed, before its first delta. */
function emptyOutput(): ChoiceOutput {
  return { tokens: [], logprobs: [], text: '', finishReason: 'abort', stopReason: null };
}

/** Add a streamed delta to its continuation (a continuation that never finished stays `abort`). */
function accumulate(o: ChoiceOutput, d: ChoiceDelta): void {
  o.tokens.push(...d.tokens);
  o.logprobs.push(...d.logprobs);
  o.text += d.text;
  if (d.finishReason) o.finishReason = d.finishReason;
}

/** The gateway's record of one prompt of a completions request (no messages, no tool calls). */
function completionRecord(g: Generation, outputs: ChoiceOutput[], usage: SampleUsage, sampler: Sampler): AnsweredCall {
  const choices = outputs.map((o) => ({
    tokens: o.tokens,
    logprobs: o.logprobs,
    finishReason: o.finishReason,
    message: { text: o.text },
    toolCalls: [],
    toolParseFailed: false,
  }));
  return { route: 'completions', promptIds: g.request.tokens, choices, usage, weightVersion: sampler.weightVersion() };
}
