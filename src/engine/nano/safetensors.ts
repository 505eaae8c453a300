/**
 * safetensors read/write for F32 tensors: 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {string: string}}, then raw
 * little-endian data. Reading validates offsets, sizes and dtypes and names the file on any error.
 */
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/files.js';
import { DataError } from '../../core/errors.js';

export interface Tensor {
  shape: number[];
  data: Float32Array;
}

export function encodeSafetensors(tensors: Record<string, Tensor>, metadata?: Record<string, string>): Buffer {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  const names = Object.keys(tensors);
  for (const name of names) {
    const t = tensors[name];
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new DataError(`safetensors: tensor ${name} has ${t.data.length} values for shape [${t.shape}]`);
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + n * 4] };
    offset += n * 4;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let pos = 8 + headerBytes.length;
  for (const name of names) {
    const d = tensors[name].data;
    Buffer.from(d.buffer, d.byteOffset, d.byteLength).copy(out, pos);
    pos += d.byteLength;
  }
  return out;
}

export function decodeSafetensors(buf: Buffer, file = 'safetensors'): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  if (buf.length < 8) throw new DataError(`${file}: too short to be a safetensors file`, file);
  const headerLen = Number(buf.readBigUInt64LE(0));
  if (headerLen > buf.length - 8 || headerLen > 100_000_000) throw new DataError(`${file}: header length ${headerLen} exceeds file size`, file);
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>>;
  try {
    header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8'));
  } catch (cause) {
    throw new DataError(`${file}: header is not valid JSON`, file, undefined, undefined, { cause });
  }
  const dataStart = 8 + headerLen;
  const tensors: Record<string, Tensor> = {};
  let metadata: Record<string, string> = {};
  const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
  if (!isObject(header)) throw new DataError(`${file}: the header is not a JSON object`, file);
  const isIndex = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (!isObject(entry) || !Object.values(entry).every((v) => typeof v === 'string')) throw new DataError(`${file}: __metadata__ must map names to strings`, file, undefined, name);
      metadata = entry as Record<string, string>;
      continue;
    }
    if (!isObject(entry)) throw new DataError(`${file}: tensor ${name}: the entry is not an object`, file, undefined, name);
    const e = entry as { dtype: unknown; shape: unknown; data_offsets: unknown };
    if (e.dtype !== 'F32') throw new DataError(`${file}: tensor ${name} has dtype ${String(e.dtype)}; only F32 is supported`, file, undefined, name);
    if (!Array.isArray(e.shape) || !e.shape.every(isIndex) || !Array.isArray(e.data_offsets) || e.data_offsets.length !== 2 || !e.data_offsets.every(isIndex)) {
      throw new DataError(`${file}: tensor ${name} needs a shape of non-negative integers and two data_offsets`, file, undefined, name);
    }
    const n = (e.shape as number[]).reduce((a, b) => a * b, 1);
    const [begin, end] = e.data_offsets as [number, number];
    if (end - begin !== n * 4 || dataStart + end > buf.length) {
      throw new DataError(`${file}: tensor ${name} offsets [${begin}, ${end}] do not match shape [${e.shape}] or file size`, file, undefined, name);
    }
    const data = new Float32Array(n);
    Buffer.from(data.buffer).set(buf.subarray(dataStart + begin, dataStart + end));
    tensors[name] = { shape: e.shape as number[], data };
  }
  return { tensors, metadata };
}

export function writeSafetensors(path: string, tensors: Record<string, Tensor>, metadata?: Record<string, string>): void {
  writeFileAtomic(path, encodeSafetensors(tensors, metadata));
}

export function readSafetensors(path: string): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (cause) {
    throw new DataError(`${path}: cannot read (${(cause as Error).message})`, path, undefined, undefined, { cause });
  }
  return decodeSafetensors(buf, path);
}
