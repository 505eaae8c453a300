/**
 * Dataset readers: JSONL (one JSON object per line) and Parquet (via hyparquet), chosen by the file
 * extension or an explicit format. A field mapping says which column is the prompt, the answer and
 * (optionally) the id. Every malformed row fails with a DataError naming the file, the line (JSONL)
 * or row (Parquet, 1-based) and the field.
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parquetReadObjects } from 'hyparquet';
import { DataError } from '../../core/errors.js';

export type DatasetFormat = 'jsonl' | 'parquet';

export interface FieldMapping {
  /** Column holding the prompt text (or the question the template formats). */
  prompt: string;
  /** Column holding the gold answer (or a gold solution the task extracts it from). */
  answer: string;
  /** Column holding a stable id; default: `<file stem>:<line or row>`. */
  id?: string;
}

/** One validated row: mapped fields plus the raw record (for templates that use other columns). */
export interface DatasetRow {
  id: string;
  prompt: string;
  answer: string;
  /** The file it came from, and its 1-based line (JSONL) or row (Parquet) number. */
  file: string;
  line: number;
  raw: Record<string, unknown>;
}

export function detectFormat(file: string): DatasetFormat {
  const ext = extname(file).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  if (ext === '.parquet') return 'parquet';
  throw new DataError(
    `${file}: cannot tell the dataset format from the extension "${ext}" (use .jsonl or .parquet, or set format)`,
    file,
  );
}

function readBytes(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (cause) {
    throw new DataError(
      `${file}: cannot read dataset file (${(cause as NodeJS.ErrnoException).code ?? String(cause)})`,
      file,
      undefined,
      undefined,
      { cause },
    );
  }
}

/** The raw records of a JSONL file with their line numbers (blank lines skipped). */
export function readJsonlRecords(file: string): Array<{ line: number; record: Record<string, unknown> }> {
  const text = readBytes(file).toString('utf8');
  const out: Array<{ line: number; record: Record<string, unknown> }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const source = lines[i].trim();
    if (!source) continue;
    let value: unknown;
    try {
      value = JSON.parse(source);
    } catch (cause) {
      throw new DataError(`${file}:${i + 1}: invalid JSON (${(cause as Error).message})`, file, i + 1, undefined, {
        cause,
      });
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new DataError(
        `${file}:${i + 1}: expected a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`,
        file,
        i + 1,
      );
    }
    out.push({ line: i + 1, record: value as Record<string, unknown> });
  }
  return out;
}

/** The raw records of a Parquet file with 1-based row numbers. */
export async function readParquetRecords(
  file: string,
): Promise<Array<{ line: number; record: Record<string, unknown> }>> {
  const bytes = readBytes(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  let rows: Array<Record<string, unknown>>;
  try {
    rows = (await parquetReadObjects({ file: buffer })) as Array<Record<string, unknown>>;
  } catch (cause) {
    throw new DataError(
      `${file}: not a readable Parquet file (${(cause as Error).message})`,
      file,
      undefined,
      undefined,
      { cause },
    );
  }
  return rows.map((record, i) => ({ line: i + 1, record }));
}

function fieldText(
  file: string,
  line: number,
  record: Record<string, unknown>,
  field: string,
  role: string,
  unit: string,
): string {
  if (!(field in record)) {
    const known = Object.keys(record).slice(0, 12).join(', ');
    throw new DataError(
      `${file}:${unit} ${line}: missing ${role} field "${field}" (the row has: ${known})`,
      file,
      line,
      field,
    );
  }
  const value = record[field];
  if (typeof value === 'string') {
    if (role !== 'id' && !value.trim())
      throw new DataError(`${file}:${unit} ${line}: ${role} field "${field}" is empty`, file, line, field);
    return value;
  }
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  throw new DataError(
    `${file}:${unit} ${line}: ${role} field "${field}" must be a string or number, got ` +
      (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value),
    file,
    line,
    field,
  );
}

/** Read and validate a dataset file. Ids must be unique. */
export async function readDataset(
  file: string,
  fields: FieldMapping,
  format: DatasetFormat = detectFormat(file),
): Promise<DatasetRow[]> {
  const records = format === 'jsonl' ? readJsonlRecords(file) : await readParquetRecords(file);
  const unit = format === 'jsonl' ? 'line' : 'row';
  const stem = file.replace(/^.*[\\/]/, '').replace(/\.[^.]*$/, '');
  const seen = new Map<string, number>();
  const rows: DatasetRow[] = [];
  for (const { line, record } of records) {
    const prompt = fieldText(file, line, record, fields.prompt, 'prompt', unit);
    const answer = fieldText(file, line, record, fields.answer, 'answer', unit);
    const id = fields.id ? fieldText(file, line, record, fields.id, 'id', unit) : `${stem}:${line}`;
    const earlier = seen.get(id);
    if (earlier !== undefined)
      throw new DataError(
        `${file}:${unit} ${line}: duplicate id "${id}" (first at ${unit} ${earlier})`,
        file,
        line,
        fields.id,
      );
    seen.set(id, line);
    rows.push({ id, prompt, answer, file, line, raw: record });
  }
  if (!rows.length) throw new DataError(`${file}: the dataset has no rows`, file);
  return rows;
}
