import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { ConfigError, DataError } from '../../src/core/errors.js';
import { defaultDataDir, getTask, readDataset } from '../../src/tasks/index.js';

const dir = mkdtempSync(join(tmpdir(), 'arbor-ds-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({ uid: `q${i}`, question: `What is ${i}+1?`, solution: `${i}+1=${i + 1}\n#### ${i + 1}` }),
  ).join('\n') + '\n';

test('JSONL: field mapping, ids, blank lines; malformed rows name file, line and field', async () => {
  const good = file('good.jsonl', rows(3).replace('\n', '\n\n'));
  const read = await readDataset(good, { prompt: 'question', answer: 'solution', id: 'uid' });
  assert.deepEqual(
    read.map((r) => [r.id, r.line]),
    [
      ['q0', 1],
      ['q1', 3],
      ['q2', 4],
    ],
  );
  assert.equal(read[1].prompt, 'What is 1+1?');
  const noId = await readDataset(good, { prompt: 'question', answer: 'solution' });
  assert.equal(noId[2].id, 'good:4');

  const cases: Array<[string, string, RegExp, number | undefined, string | undefined]> = [
    [
      'badjson.jsonl',
      '{"question":"a","solution":"b"}\n{"question": oops}\n',
      /badjson\.jsonl:2: invalid JSON/,
      2,
      undefined,
    ],
    ['array.jsonl', '[1,2]\n', /array\.jsonl:1: expected a JSON object/, 1, undefined],
    [
      'missing.jsonl',
      '{"question":"a","solution":"b"}\n{"question":"a"}\n',
      /missing\.jsonl:line 2: missing answer field "solution"/,
      2,
      'solution',
    ],
    [
      'type.jsonl',
      '{"question":["a"],"solution":"b"}\n',
      /type\.jsonl:line 1: prompt field "question" must be a string or number, got an array/,
      1,
      'question',
    ],
    ['empty.jsonl', '{"question":"  ","solution":"b"}\n', /prompt field "question" is empty/, 1, 'question'],
    [
      'dup.jsonl',
      '{"uid":"a","question":"a","solution":"b"}\n{"uid":"a","question":"c","solution":"d"}\n',
      /dup\.jsonl:line 2: duplicate id "a" \(first at line 1\)/,
      2,
      'uid',
    ],
  ];
  for (const [name, text, message, line, field] of cases) {
    await assert.rejects(
      readDataset(file(name, text), {
        prompt: 'question',
        answer: 'solution',
        id: name === 'dup.jsonl' ? 'uid' : undefined,
      }),
      (e: unknown) => {
        assert.ok(e instanceof DataError, name);
        assert.match(e.message, message);
        assert.equal(e.line, line, `${name} line`);
        assert.equal(e.field, field, `${name} field`);
        return true;
      },
    );
  }
  await assert.rejects(readDataset(file('none.jsonl', '\n\n'), { prompt: 'q', answer: 'a' }), /has no rows/);
  await assert.rejects(
    readDataset(join(dir, 'absent.jsonl'), { prompt: 'q', answer: 'a' }),
    /cannot read dataset file \(ENOENT\)/,
  );
  await assert.rejects(
    readDataset(file('x.csv', 'a,b'), { prompt: 'q', answer: 'a' }),
    /cannot tell the dataset format/,
  );
});

test('Parquet: rows read with 1-based row numbers; a missing column and a corrupt file are named', async () => {
  const buf = parquetWriteBuffer({
    columnData: [
      { name: 'problem', data: ['1+1', '2+2', '3+3'], type: 'STRING' },
      { name: 'answer', data: [2, 4, 6], type: 'INT32' },
    ],
  });
  const path = join(dir, 'p.parquet');
  writeFileSync(path, Buffer.from(buf));
  const read = await readDataset(path, { prompt: 'problem', answer: 'answer' });
  assert.deepEqual(
    read.map((r) => [r.id, r.prompt, r.answer]),
    [
      ['p:1', '1+1', '2'],
      ['p:2', '2+2', '4'],
      ['p:3', '3+3', '6'],
    ],
  );
  await assert.rejects(
    readDataset(path, { prompt: 'question', answer: 'answer' }),
    (e: unknown) =>
      e instanceof DataError &&
      /p\.parquet:row 1: missing prompt field "question" \(the row has: problem, answer\)/.test(e.message),
  );
  const bad = file('bad.parquet', 'PAR1 this is not parquet PAR1');
  await assert.rejects(
    readDataset(bad, { prompt: 'problem', answer: 'answer' }),
    (e: unknown) => e instanceof DataError && /bad\.parquet: not a readable Parquet file/.test(e.message),
  );
});

test('dataset task: template, answers from solutions, a deterministic disjoint split, seeded train order', async () => {
  const path = file('math.jsonl', rows(200));
  const task = getTask('dataset', {
    train: path,
    fields: { prompt: 'question', answer: 'solution', id: 'uid' },
    template: 'Q: {prompt} ({uid})',
    answerFrom: 'solution',
    testFraction: 0.25,
  });
  await task.prepare!();
  const train = task.makeItems('train', 1000, 1);
  const test = task.makeItems('test', 1000, 1);
  assert.equal(train.length + test.length, 200);
  assert.ok(test.length > 30 && test.length < 70, `test split ${test.length} of 200 at 0.25`);
  const testIds = new Set(test.map((i) => i.id));
  assert.ok(
    train.every((i) => !testIds.has(i.id)),
    'splits are disjoint',
  );
  const q7 = [...train, ...test].find((i) => i.id === 'q7')!;
  assert.equal(q7.prompt, 'Q: What is 7+1? (q7)');
  assert.equal(q7.answer, '8');
  assert.equal(task.demonstration(q7), '7+1=8\n#### 8');
  assert.deepEqual(
    task.makeItems('train', 5, 1).map((i) => i.id),
    train.slice(0, 5).map((i) => i.id),
  );
  assert.notDeepEqual(
    task.makeItems('train', 5, 2).map((i) => i.id),
    train.slice(0, 5).map((i) => i.id),
  );
  assert.deepEqual(
    task.makeItems('test', 3, 9).map((i) => i.id),
    test.slice(0, 3).map((i) => i.id),
    'test keeps file order',
  );
  const r = await task.reward.score({ response: 'so 7+1 = 8.\n#### 8', item: q7 });
  assert.equal(r.reward, 1);
  assert.equal((await task.reward.score({ response: '#### 9', item: q7 })).reward, 0);
  // a row whose solution has no final answer fails at load with its file and line
  const broken = getTask('dataset', {
    train: file(
      'broken.jsonl',
      rows(2) + JSON.stringify({ uid: 'z', question: 'q', solution: 'no answer here' }) + '\n',
    ),
    fields: { prompt: 'question', answer: 'solution' },
    answerFrom: 'solution',
  });
  await assert.rejects(
    broken.prepare!(),
    (e: unknown) => e instanceof DataError && /broken\.jsonl:3: no final answer/.test(e.message),
  );
  assert.throws(
    () => getTask('dataset', { train: path, feilds: {} }),
    (e: unknown) => e instanceof ConfigError && e.path === 'task.options.feilds',
  );
  await assert.rejects(getTask('dataset', { train: join(dir, 'nope.jsonl') }).prepare!(), /dataset file not found/);
});

const shared = defaultDataDir();
const haveShared = existsSync(join(shared, 'gsm8k/test.jsonl'));

test(
  'gsm8k and math500 tasks over the shared data: sizes, gold answers, demonstrations verify',
  { skip: haveShared ? false : `no shared data at ${shared}` },
  async () => {
    const gsm = getTask('gsm8k');
    await gsm.prepare!();
    const test = gsm.makeItems('test', 10_000, 0);
    assert.equal(test.length, 1319);
    assert.equal(gsm.makeItems('train', 10_000, 0).length, 7473);
    assert.equal(test[0].answer, '18');
    assert.match(test[0].prompt, /^Janet’s ducks lay 16 eggs[\s\S]*output the final answer after "####"\.$/);
    assert.ok(!test.some((i) => i.demonstration!.includes('<<')), 'calculator annotations are removed');
    for (const item of test.slice(0, 40))
      assert.equal((await gsm.reward.score({ response: gsm.demonstration(item), item })).reward, 1, item.id);

    const math = getTask('math500');
    await math.prepare!();
    const mt = math.makeItems('test', 10_000, 0);
    assert.equal(mt.length, 500);
    assert.match(mt[0].prompt, /within \\boxed\{\}\.$/);
    assert.throws(
      () => math.makeItems('train', 10, 0),
      (e: unknown) => e instanceof ConfigError && /evaluation-only/.test(e.message),
    );
    for (const item of mt.slice(0, 40))
      assert.equal((await math.reward.score({ response: math.demonstration(item), item })).reward, 1, item.id);
    const half = getTask('math500', { testFraction: 0.5 });
    await half.prepare!();
    assert.equal(half.makeItems('train', 1000, 0).length + half.makeItems('test', 1000, 0).length, 500);
  },
);
