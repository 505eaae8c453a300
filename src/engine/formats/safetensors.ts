/**
 * safetensors files (huggingface/safetensors@24b0b28 README "Format"): an 8-byte little-endian header
 * length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {str: str}},
 * then the raw little-endian data. Tensors are read as float32 whatever their stored dtype (F32, F16,
 * BF16), one tensor at a time from an open file, so a multi-gigabyte checkpoint never sits in memory
 * whole. The header is validated first (dtype, shape, offsets within the file, no overlap); every error
 * is a DataError naming the file and the tensor. Writing streams tensor by tensor to a temporary file
 * that is renamed into place (crash-safe), in F32, F16 or BF16.
 */
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { writeFileAtomicWith } from '../../core/files.js';
import { DataError } from '../../core/errors.js';

export interface Tensor {
  shape: number[];
  data: Float32Array;
}

/** Stored element types Arbor reads (converted to float32) and writes. */
export type FloatDtype = 'F32' | 'F16' | 'BF16';

const BYTES: Record<FloatDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** The Rust reader's MAX_HEADER_SIZE (safetensors/src/tensor.rs). */
const MAX_HEADER = 100_000_000;

/** One tensor's header entry; `begin`/`end` are absolute file offsets. */
export interface TensorEntry {
  name: string;
  dtype: FloatDtype;
  shape: number[];
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  file: string;
  entries: Map<string, TensorEntry>;
  metadata: Record<string, string>;
  /** File size in bytes. */
  size: number;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
const isIndex = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;

/** Validate a parsed header against the file size; throws a DataError naming the file and tensor. */
function parseHeader(file: string, headerLen: number, json: string, size: number): SafetensorsHeader {
  let header: unknown;
  try {
    header = JSON.parse(json);
  } catch (cause) {
    throw new DataError(`${file}: header is not valid JSON`, file, undefined, undefined, { cause });
  }
  if (!isObject(header)) throw new DataError(`${file}: the header is not a JSON object`, file);
  const dataStart = 8 + headerLen;
  const entries = new Map<string, TensorEntry>();
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (!isObject(entry) || !Object.values(entry).every((v) => typeof v === 'string')) {
        throw new DataError(`${file}: __metadata__ must map names to strings`, file, undefined, name);
      }
      metadata = entry as Record<string, string>;
      continue;
    }
    if (!isObject(entry))
      throw new DataError(`${file}: tensor ${name}: the entry is not an object`, file, undefined, name);
    const { dtype, shape, data_offsets: offsets } = entry as { dtype: unknown; shape: unknown; data_offsets: unknown };
    if (dtype !== 'F32' && dtype !== 'F16' && dtype !== 'BF16') {
      throw new DataError(
        `${file}: tensor ${name} has dtype ${String(dtype)}; only F32, F16 and BF16 are supported`,
        file,
        undefined,
        name,
      );
    }
    if (
      !Array.isArray(shape) ||
      !shape.every(isIndex) ||
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every(isIndex)
    ) {
      throw new DataError(
        `${file}: tensor ${name} needs a shape of non-negative integers and two data_offsets`,
        file,
        undefined,
        name,
      );
    }
    const n = (shape as number[]).reduce((a, b) => a * b, 1);
    const [begin, end] = offsets as [number, number];
    if (end < begin || end - begin !== n * BYTES[dtype]) {
      throw new DataError(
        `${file}: tensor ${name} offsets [${begin}, ${end}] do not match its shape [${shape}] in ${dtype}`,
        file,
        undefined,
        name,
      );
    }
    if (dataStart + end > size) {
      throw new DataError(
        `${file}: tensor ${name} offsets [${begin}, ${end}] run past the end of the file (${size} bytes): truncated`,
        file,
        undefined,
        name,
      );
    }
    entries.set(name, { name, dtype, shape: shape as number[], begin: dataStart + begin, end: dataStart + end });
  }
  const sorted = [...entries.values()].sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].begin < sorted[i - 1].end)
      throw new DataError(
        `${file}: tensors ${sorted[i - 1].name} and ${sorted[i].name} overlap`,
        file,
        undefined,
        sorted[i].name,
      );
  }
  return { file, entries, metadata, size };
}

/** Convert `n` stored elements at `bytes[offset..]` into `out[at..]`. */
function convert(bytes: Uint8Array, offset: number, dtype: FloatDtype, out: Float32Array, at: number, n: number): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, n * BYTES[dtype]);
  if (dtype === 'F32') {
    for (let i = 0; i < n; i++) out[at + i] = view.getFloat32(i * 4, true);
  } else if (dtype === 'BF16') {
    for (let i = 0; i < n; i++) {
      U32_SCRATCH[0] = view.getUint16(i * 2, true) << 16;
      out[at + i] = F32_SCRATCH[0];
    }
  } else {
    for (let i = 0; i < n; i++) out[at + i] = halfToFloat(view.getUint16(i * 2, true));
  }
}

/** IEEE binary16 bits → number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** number → bfloat16 bits (round to nearest even; NaN stays NaN). */
const F32_SCRATCH = new Float32Array(1);
const U32_SCRATCH = new Uint32Array(F32_SCRATCH.buffer);

export function floatToBf16(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  F32_SCRATCH[0] = x;
  const bits = U32_SCRATCH[0];
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** number → IEEE binary16 bits (round to nearest even, overflow to infinity). */
export function floatToHalf(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(Math.fround(x));
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -24 / 2) return sign;
  if (a < 2 ** -14) return sign | roundEven(a / 2 ** -24);
  let exp = Math.floor(Math.log2(a));
  if (2 ** exp > a) exp--;
  let frac = roundEven((a / 2 ** exp - 1) * 1024);
  if (frac === 1024) {
    frac = 0;
    exp++;
  }
  if (exp > 15) return sign | 0x7c00;
  return sign | ((exp + 15) << 10) | frac;
}

function roundEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
}

/**
 * An open safetensors file: the validated header, and tensors read one at a time (converted to
 * float32). Close it when done (`close` is idempotent).
 */
export class SafetensorsFile {
  private fd: number | undefined;
  readonly header: SafetensorsHeader;

  private constructor(
    readonly file: string,
    fd: number,
  ) {
    this.fd = fd;
    try {
      const size = fstatSync(fd).size;
      if (size < 8) throw new DataError(`${file}: too short to be a safetensors file (${size} bytes)`, file);
      const lenBytes = Buffer.alloc(8);
      readSync(fd, lenBytes, 0, 8, 0);
      const headerLen = Number(lenBytes.readBigUInt64LE(0));
      if (headerLen > size - 8 || headerLen > MAX_HEADER) {
        throw new DataError(
          `${file}: header length ${headerLen} exceeds the file size (${size} bytes): truncated or not a safetensors file`,
          file,
        );
      }
      const json = Buffer.alloc(headerLen);
      readSync(fd, json, 0, headerLen, 8);
      this.header = parseHeader(file, headerLen, json.toString('utf8'), size);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  static open(file: string): SafetensorsFile {
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch (cause) {
      throw new DataError(`${file}: cannot read (${(cause as Error).message})`, file, undefined, undefined, { cause });
    }
    return new SafetensorsFile(file, fd);
  }

  entry(name: string): TensorEntry | undefined {
    return this.header.entries.get(name);
  }

  /** Read tensor `name` as float32 into `out` (allocated when absent); checks the element count. */
  read(name: string, out?: Float32Array): Float32Array {
    const e = this.header.entries.get(name);
    if (!e) throw new DataError(`${this.file}: no tensor ${name}`, this.file, undefined, name);
    if (this.fd === undefined) throw new DataError(`${this.file}: read after close`, this.file, undefined, name);
    const n = e.shape.reduce((a, b) => a * b, 1);
    const target = out ?? new Float32Array(n);
    if (target.length !== n)
      throw new DataError(
        `${this.file}: tensor ${name} has ${n} values, the model's has ${target.length}`,
        this.file,
        undefined,
        name,
      );
    const size = BYTES[e.dtype];
    const chunkElems = Math.max(1, Math.floor((8 << 20) / size));
    const buf = Buffer.alloc(Math.min(n, chunkElems) * size);
    for (let done = 0; done < n;) {
      const count = Math.min(chunkElems, n - done);
      const bytes = count * size;
      let got = 0;
      while (got < bytes) {
        const r = readSync(this.fd, buf, got, bytes - got, e.begin + done * size + got);
        if (r === 0)
          throw new DataError(
            `${this.file}: tensor ${name}: unexpected end of file (truncated)`,
            this.file,
            undefined,
            name,
          );
        got += r;
      }
      convert(buf, 0, e.dtype, target, done, count);
      done += count;
    }
    return target;
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Every tensor of an in-memory safetensors file (small files: adapters, optimizer states, tests). */
export function decodeSafetensors(
  buf: Buffer,
  file = 'safetensors',
): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  if (buf.length < 8) throw new DataError(`${file}: too short to be a safetensors file`, file);
  const headerLen = Number(buf.readBigUInt64LE(0));
  if (headerLen > buf.length - 8 || headerLen > MAX_HEADER)
    throw new DataError(`${file}: header length ${headerLen} exceeds file size`, file);
  const header = parseHeader(file, headerLen, buf.subarray(8, 8 + headerLen).toString('utf8'), buf.length);
  const tensors: Record<string, Tensor> = {};
  for (const e of header.entries.values()) {
    const n = e.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    convert(buf, e.begin, e.dtype, data, 0, n);
    tensors[e.name] = { shape: e.shape, data };
  }
  return { tensors, metadata: header.metadata };
}

/** The header of `tensors` written in `dtype` (padded so the data starts 8-aligned). */
function headerBytes(
  tensors: Record<string, Tensor>,
  dtype: FloatDtype,
  metadata?: Record<string, string>,
): { bytes: Buffer; dataSize: number } {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length)
      throw new DataError(`safetensors: tensor ${name} has ${t.data.length} values for shape [${t.shape}]`);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + n * BYTES[dtype]] };
    offset += n * BYTES[dtype];
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const body = Buffer.from(json, 'utf8');
  const bytes = Buffer.alloc(8 + body.length);
  bytes.writeBigUInt64LE(BigInt(body.length), 0);
  body.copy(bytes, 8);
  return { bytes, dataSize: offset };
}

/** `data` stored as `dtype`, little-endian. */
function tensorBytes(data: Float32Array, dtype: FloatDtype): Buffer {
  if (dtype === 'F32') return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const out = Buffer.alloc(data.length * 2);
  const encode = dtype === 'BF16' ? floatToBf16 : floatToHalf;
  for (let i = 0; i < data.length; i++) out.writeUInt16LE(encode(data[i]), i * 2);
  return out;
}

export function encodeSafetensors(
  tensors: Record<string, Tensor>,
  metadata?: Record<string, string>,
  dtype: FloatDtype = 'F32',
): Buffer {
  const { bytes } = headerBytes(tensors, dtype, metadata);
  return Buffer.concat([bytes, ...Object.values(tensors).map((t) => tensorBytes(t.data, dtype))]);
}

/** Write tensors to `path` atomically, streaming one tensor at a time (large models never double in memory). */
export function writeSafetensors(
  path: string,
  tensors: Record<string, Tensor>,
  metadata?: Record<string, string>,
  dtype: FloatDtype = 'F32',
): void {
  const { bytes } = headerBytes(tensors, dtype, metadata);
  writeFileAtomicWith(path, (write) => {
    write(bytes);
    for (const t of Object.values(tensors)) {
      // large tensors go out in 16M-element pieces (conversion buffers stay small)
      for (let i = 0; i < t.data.length; i += 1 << 24) write(tensorBytes(t.data.subarray(i, i + (1 << 24)), dtype));
    }
  });
}

/**
 * Write tensors whose values are produced one at a time (`fill(name, out)` fills a float32 buffer of
 * the tensor's size): a model larger than memory allows in one piece is generated and written tensor by
 * tensor, atomically.
 */
export function writeSafetensorsFrom(
  path: string,
  shapes: Array<{ name: string; shape: number[] }>,
  fill: (name: string, out: Float32Array) => void,
  dtype: FloatDtype = 'F32',
  metadata?: Record<string, string>,
): void {
  const placeholders = Object.fromEntries(
    shapes.map((s) => [
      s.name,
      { shape: s.shape, data: { length: s.shape.reduce((a, b) => a * b, 1) } as Float32Array },
    ]),
  );
  const { bytes } = headerBytes(placeholders, dtype, metadata);
  writeFileAtomicWith(path, (write) => {
    write(bytes);
    for (const s of shapes) {
      const data = new Float32Array(s.shape.reduce((a, b) => a * b, 1));
      fill(s.name, data);
      for (let i = 0; i < data.length; i += 1 << 24) write(tensorBytes(data.subarray(i, i + (1 << 24)), dtype));
    }
  });
}

/** Read a whole (small) safetensors file. */
export function readSafetensors(path: string): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (cause) {
    throw new DataError(`${path}: cannot read (${(cause as Error).message})`, path, undefined, undefined, { cause });
  }
  return decodeSafetensors(buf, path);
}
