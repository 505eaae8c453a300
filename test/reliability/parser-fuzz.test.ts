/**
 * Issue 17: the input parsers, fuzzed with fast-check (config JSON and YAML, dataset JSONL,
 * safetensors, tokenizer files, tree files): 1,700 cases each (10,200 in all), every one returning
 * a value or one of Arbor's own errors promptly. The fuzzing found that hand-made safetensors headers
 * (null entries, a non-object header) escaped as TypeErrors; they are DataErrors naming the file now.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DataError } from '../../src/core/errors.js';
import { decodeSafetensors } from '../../src/engine/formats/safetensors.js';
import { runParserFuzz } from '../../testkit/reliability/parser-fuzz.js';

test(
  'every parser answers 1,700 generated inputs with a value or an ArborError (10,200 cases)',
  { timeout: 300_000 },
  async () => {
    const report = await runParserFuzz(1700, 20261124);
    assert.equal(
      Object.values(report.cases).reduce((a, b) => a + b, 0),
      10_200,
    );
    assert.deepEqual(report.failures, []);
    assert.ok(report.slowestMs < 2000, `slowest case ${report.slowestMs} ms`);
  },
);

test('safetensors headers the fuzzing found: each a DataError naming the file', () => {
  const withHeader = (h: string) => {
    const text = Buffer.from(h);
    const b = Buffer.alloc(8 + text.length + 8);
    b.writeBigUInt64LE(BigInt(text.length), 0);
    text.copy(b, 8);
    return b;
  };
  for (const [h, re] of [
    ['null', /the header is not a JSON object/],
    ['[1,2]', /the header is not a JSON object/],
    ['{"w":null}', /tensor w: the entry is not an object/],
    ['{"w":{"dtype":"F32","shape":[-1],"data_offsets":[4,0]}}', /needs a shape of non-negative integers/],
    ['{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}', /two data_offsets/],
    ['{"__metadata__":{"a":1}}', /__metadata__ must map names to strings/],
  ] as Array<[string, RegExp]>) {
    assert.throws(
      () => decodeSafetensors(withHeader(h), 'x.safetensors'),
      (e: unknown) => e instanceof DataError && e.file === 'x.safetensors' && re.test(e.message),
      h,
    );
  }
});
