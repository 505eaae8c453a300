/**
 * tokenizer/parsed.ts: a tokenizer.json is parsed once per process, found again by its bytes (a copy in
 * another directory too), parsed again when it changes, kept frozen, and built once per set of
 * tokenizer_config.json options; the least recently used file is dropped past PARSED_TOKENIZERS_KEPT.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { loadTokenizer } from '../../src/engine/tokenizer/load.js';
import {
  forgetParsedTokenizers,
  PARSED_TOKENIZERS_KEPT,
  readTokenizerFile,
} from '../../src/engine/tokenizer/parsed.js';

/** A small BPE tokenizer.json: no decoder, so decode joins tokens with spaces (what clean-up then tidies). */
function tokenizerJson(extraToken?: string): Record<string, unknown> {
  const vocab: Record<string, number> = { a: 0, b: 1, ab: 2, ',': 3, c: 4 };
  if (extraToken) vocab[extraToken] = 6;
  return {
    version: '1.0',
    added_tokens: [
      { id: 5, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: null,
    decoder: null,
    model: { type: 'BPE', unk_token: null, fuse_unk: false, byte_fallback: false, vocab, merges: ['a b'] },
  };
}

function writeTokenizer(dir: string, json: Record<string, unknown>, cleanUp: boolean): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({ eos_token: '</s>', clean_up_tokenization_spaces: cleanUp }),
  );
  return dir;
}

/** A scratch directory and an empty cache, both undone when the test ends. */
function scratch(t: TestContext): string {
  forgetParsedTokenizers();
  const root = mkdtempSync(join(tmpdir(), 'arbor-parsed-tok-'));
  t.after(() => {
    forgetParsedTokenizers();
    rmSync(root, { recursive: true, force: true });
  });
  return root;
}

test('parsed tokenizers: a copy is found by its bytes, a change is parsed again, the JSON is frozen', (t) => {
  const root = scratch(t);
  const a = writeTokenizer(join(root, 'a'), tokenizerJson(), false);
  const copy = writeTokenizer(join(root, 'copy'), tokenizerJson(), false);
  const first = readTokenizerFile(join(a, 'tokenizer.json'));
  assert.equal(readTokenizerFile(join(copy, 'tokenizer.json')), first, 'the same bytes elsewhere: the same parse');
  assert.ok(Object.isFrozen(first.json) && Object.isFrozen((first.json.model as { vocab: object }).vocab));
  assert.throws(() => {
    (first.json.model as Record<string, unknown>).type = 'Unigram';
  }, TypeError);

  const tokA = HFTokenizer.fromDirectory(a);
  const tokCopy = loadTokenizer(copy) as HFTokenizer;
  assert.equal(tokA.vocabSize, 6);
  assert.deepEqual(tokCopy.encode('ab , c'), [2, 3, 4]);
  assert.equal(first.built.size, 1, 'one set of options: built once');

  // the same file rewritten with one more token: parsed again, and the tokenizer sees the new token
  writeTokenizer(a, tokenizerJson('abc'), false);
  const changed = readTokenizerFile(join(a, 'tokenizer.json'));
  assert.notEqual(changed, first);
  assert.notEqual(changed.hash, first.hash);
  assert.equal(HFTokenizer.fromDirectory(a).vocabSize, 7);
  assert.equal(HFTokenizer.fromDirectory(copy).vocabSize, 6);
});

test('parsed tokenizers: options from tokenizer_config.json key the built tokenizer', (t) => {
  const root = scratch(t);
  const raw = HFTokenizer.fromDirectory(writeTokenizer(join(root, 'raw'), tokenizerJson(), false));
  const clean = HFTokenizer.fromDirectory(writeTokenizer(join(root, 'clean'), tokenizerJson(), true));
  assert.equal(raw.decode([2, 3, 4]), 'ab , c');
  assert.equal(clean.decode([2, 3, 4]), 'ab, c', 'clean_up_tokenization_spaces: true removes the space before ","');
  assert.equal(readTokenizerFile(join(root, 'raw', 'tokenizer.json')).built.size, 2);
});

test('parsed tokenizers: past PARSED_TOKENIZERS_KEPT files the least recently used is parsed again', (t) => {
  const root = scratch(t);
  const files = Array.from({ length: PARSED_TOKENIZERS_KEPT + 1 }, (_, i) =>
    join(writeTokenizer(join(root, `t${i}`), tokenizerJson(`x${i}`), false), 'tokenizer.json'),
  );
  const parses = files.map((f) => readTokenizerFile(f));
  // the first was used least recently when the last came in: dropped; the last is still there
  assert.notEqual(readTokenizerFile(files[0]), parses[0]);
  assert.equal(readTokenizerFile(files.at(-1)!), parses.at(-1));
  // a char tokenizer file is never kept
  const char = join(root, 'char.json');
  writeFileSync(char, JSON.stringify({ kind: 'char', charset: 'ab', specials: [] }));
  assert.notEqual(readTokenizerFile(char), readTokenizerFile(char));
});
