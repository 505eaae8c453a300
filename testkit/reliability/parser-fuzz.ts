/**
 * Property-based fuzzing of Arbor's input parsers with fast-check: configs (JSON values and
 * YAML text), dataset JSONL rows, safetensors files (random bytes and mutations of valid files),
 * tokenizer files and tree files. The property: a parser returns a value or throws one of Arbor's
 * own errors (ArborError: ConfigError, DataError, ...) promptly — never a TypeError, a RangeError, a
 * hang or a crash. Shared by the test (a bounded count) and the reliability bench.
 */
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArborError } from '../../src/core/errors.js';
import { treeFromJSON } from '../../src/core/tree.js';
import { decodeSafetensors, encodeSafetensors } from '../../src/engine/formats/safetensors.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { loadConfig, parseConfig } from '../../src/run/config.js';
import { readDataset } from '../../src/tasks/datasets/read.js';

export interface FuzzReport {
  /** Cases run per parser. */
  cases: Record<string, number>;
  /** Counterexamples: parser, the error that escaped, and the input (shortened). */
  failures: Array<{ parser: string; error: string; input: string }>;
  /** The slowest single case, ms (a hang would show here, bounded by the case timeout). */
  slowestMs: number;
}

const MAX_CASE_MS = 2000;

/** Run `fn`; an escape that is not an ArborError, or a case slower than MAX_CASE_MS, is a failure. */
function check(report: FuzzReport, parser: string, input: unknown, fn: () => unknown): void {
  const started = performance.now();
  try {
    fn();
  } catch (error) {
    if (!(error instanceof ArborError))
      report.failures.push({
        parser,
        error: `${(error as Error)?.name}: ${(error as Error)?.message}`.slice(0, 300),
        input: String(typeof input === 'string' ? input : JSON.stringify(input)).slice(0, 300),
      });
  }
  const ms = performance.now() - started;
  report.slowestMs = Math.max(report.slowestMs, ms);
  if (ms > MAX_CASE_MS)
    report.failures.push({ parser, error: `took ${ms.toFixed(0)} ms`, input: String(input).slice(0, 300) });
}

/** Config-shaped JSON: known section names with arbitrary values, so the walk goes deep. */
const configLike = fc.dictionary(
  fc.constantFrom(
    'run',
    'task',
    'model',
    'sft',
    'engine',
    'sampling',
    'generate',
    'control',
    'allocate',
    'prune',
    'qualityHead',
    'reward',
    'optimize',
    'trainer',
    'store',
    'bogus',
  ),
  fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.dictionary(
      fc.constantFrom('kind', 'steps', 'seed', 'name', 'groupSize', 'learningRate', 'parts', 'options', 'dModel', 'x'),
      fc.jsonValue({ maxDepth: 2 }),
    ),
  ),
);

function validSafetensors(): Buffer {
  return encodeSafetensors(
    {
      'w.a': { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
      b: { shape: [4], data: new Float32Array(4) },
    },
    { format: 'x' },
  );
}

export async function runParserFuzz(casesPerParser: number, seed = 1): Promise<FuzzReport> {
  const report: FuzzReport = { cases: {}, failures: [], slowestMs: 0 };
  const dir = mkdtempSync(join(tmpdir(), 'arbor-fuzz-'));
  const opts = { numRuns: casesPerParser, seed };
  const run = <T>(parser: string, arb: fc.Arbitrary<T>, fn: (x: T) => void) => {
    report.cases[parser] = 0;
    fc.assert(
      fc.property(arb, (x) => {
        report.cases[parser]++;
        check(report, parser, x, () => fn(x));
        return true;
      }),
      opts,
    );
  };
  try {
    run('config-json', fc.oneof(configLike, fc.jsonValue({ maxDepth: 4 })), (x) => parseConfig(x, 'fuzz.json'));
    const yamlFile = join(dir, 'c.yaml');
    run(
      'config-yaml',
      fc.oneof(
        fc.string({ maxLength: 200 }),
        configLike.map((c) => JSON.stringify(c)),
      ),
      (text) => {
        writeFileSync(yamlFile, text);
        loadConfig(yamlFile);
      },
    );
    const dataFile = join(dir, 'd.jsonl');
    const row = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
      fc
        .record({
          prompt: fc.jsonValue({ maxDepth: 1 }),
          answer: fc.jsonValue({ maxDepth: 1 }),
          id: fc.oneof(fc.string(), fc.integer()),
        })
        .map((r) => JSON.stringify(r)),
      fc.string({ maxLength: 40 }),
    );
    report.cases['dataset-jsonl'] = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(row, { maxLength: 6 }), async (rows) => {
        report.cases['dataset-jsonl']++;
        writeFileSync(dataFile, rows.join('\n'));
        const started = performance.now();
        try {
          await readDataset(dataFile, { prompt: 'prompt', answer: 'answer', id: 'id' }, 'jsonl');
        } catch (error) {
          if (!(error instanceof ArborError))
            report.failures.push({
              parser: 'dataset-jsonl',
              error: `${(error as Error)?.name}: ${(error as Error)?.message}`.slice(0, 300),
              input: rows.join('\n').slice(0, 300),
            });
        }
        report.slowestMs = Math.max(report.slowestMs, performance.now() - started);
        return true;
      }),
      opts,
    );
    const valid = validSafetensors();
    const mutated = fc
      .tuple(
        fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
        fc.nat(valid.length),
      )
      .map(([edits, cut]) => {
        const b = Buffer.from(valid.subarray(0, Math.max(1, cut)));
        for (const [i, v] of edits) if (i < b.length) b[i] = v;
        return b;
      });
    const header = fc.jsonValue({ maxDepth: 3 }).map((h) => {
      const text = Buffer.from(JSON.stringify(h));
      const out = Buffer.alloc(8 + text.length + 16);
      out.writeBigUInt64LE(BigInt(text.length), 0);
      text.copy(out, 8);
      return out;
    });
    run(
      'safetensors',
      fc.oneof(
        fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
        mutated,
        header,
      ),
      (buf) => decodeSafetensors(buf, 'fuzz.safetensors'),
    );
    run(
      'tokenizer',
      fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        fc.record(
          {
            vocab: fc.oneof(fc.string(), fc.array(fc.string()), fc.jsonValue()),
            specials: fc.jsonValue({ maxDepth: 2 }),
          },
          { requiredKeys: [] },
        ),
      ),
      (json) => CharTokenizer.fromJSON(json, 'fuzz-tokenizer.json'),
    );
    run(
      'tree',
      fc.oneof(
        fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
        fc.string({ maxLength: 100 }),
      ),
      (text) => treeFromJSON(text, 'fuzz.jsonl:1'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return report;
}
