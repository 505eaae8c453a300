/**
 * Turns a `tinker://…` sampler-weights path into a directory vLLM or SGLang can hot-load: downloads
 * the checkpoint archive (`GET /api/v1/training_runs/{id}/checkpoints/{cid}/archive` → 302 to a signed
 * URL, or 200 `{url}`), extracts the tar(.gz), and rewrites the adapter into the Hugging Face PEFT
 * layout as tinker-cookbook's `weights.build_lora_adapter` does. Dense and 3-D expert LoRA tensors
 * are handled; fused-projection merges (Nemotron/Mamba) and per-family prefix remaps are not.
 * The API key goes to the Tinker service only, never to the redirect target.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { EngineCallError } from '../../core/errors.js';
import type { Secret } from '../../core/secret.js';

/** `tinker://<run>/sampler_weights/<name>` (hosted) or `tinker://<run>/<name>` (SkyRL tx). */
export interface TinkerPath {
  runId: string;
  kind: string | undefined;
  name: string;
}

export function parseTinkerPath(path: string): TinkerPath {
  const m = /^tinker:\/\/([^/]+)\/(?:([^/]+)\/)?([^/]+)$/.exec(path);
  if (!m) throw new EngineCallError(`not a tinker:// checkpoint path: ${JSON.stringify(path)}`, { isRetryable: false });
  return { runId: m[1], kind: m[2], name: m[3] };
}

export interface AdapterOptions {
  /** The Tinker service base URL. */
  baseUrl: string;
  apiKey?: Secret;
  /** Where converted adapters are written (one directory per checkpoint); the sampling servers must see it. */
  cacheDir: string;
  /** Base model name written to adapter_config.json. */
  baseModel: string;
  /** The base model ties its output head to the embedding (no lm_head): unembed LoRA maps to model.embed_tokens. */
  tiedEmbeddings?: boolean;
  /** Vision-language model whose keys live under model.language_model. */
  languageModelPrefix?: boolean;
}

/** Download, extract and convert the adapter at `path`; returns the PEFT directory (cached). */
export async function fetchTinkerAdapter(path: string, options: AdapterOptions): Promise<string> {
  const p = parseTinkerPath(path);
  const out = join(options.cacheDir, `${p.runId}-${p.name}`.replace(/[^A-Za-z0-9_.-]+/g, '_'));
  if (existsSync(join(out, 'adapter_config.json'))) return out;
  const archive = await downloadArchive(p, options);
  const files = untar(archive[0] === 0x1f && archive[1] === 0x8b ? gunzipSync(archive) : archive);
  const find = (name: string) => [...files.entries()].find(([f]) => f === name || f.endsWith(`/${name}`))?.[1];
  const weights = find('adapter_model.safetensors');
  const config = find('adapter_config.json');
  if (!weights || !config)
    throw new EngineCallError(
      `${path}: archive has no adapter_model.safetensors + adapter_config.json (files: ${[...files.keys()].join(', ')})`,
      { isRetryable: false },
    );
  const peft = convertToPeft(weights, JSON.parse(config.toString('utf8')) as Record<string, unknown>, options);
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(join(tmp, 'adapter_model.safetensors'), peft.weights);
  writeFileSync(join(tmp, 'adapter_config.json'), JSON.stringify(peft.config, null, 2) + '\n');
  rmSync(out, { recursive: true, force: true });
  renameSync(tmp, out);
  return out;
}

/** The archive bytes: hosted `checkpoints/sampler_weights/<name>/archive`, else SkyRL's `checkpoints/<name>/archive`. */
async function downloadArchive(p: TinkerPath, options: AdapterOptions): Promise<Buffer> {
  const base = options.baseUrl.replace(/\/+$/, '');
  const ids = p.kind ? [`${p.kind}/${p.name}`, p.name] : [p.name];
  let last = '';
  for (const cid of ids) {
    const url = `${base}/api/v1/training_runs/${encodeURIComponent(p.runId)}/checkpoints/${cid.split('/').map(encodeURIComponent).join('/')}/archive`;
    const headers: Record<string, string> = options.apiKey ? { 'x-api-key': options.apiKey.reveal() } : {};
    const res = await fetch(url, { headers, redirect: 'manual' });
    if (res.status === 404) {
      last = `${url}: HTTP 404 ${(await res.text()).slice(0, 200)}`;
      continue;
    }
    if (res.status >= 300 && res.status < 400) {
      const location = res.headers.get('location');
      if (!location)
        throw new EngineCallError(`${url}: redirect without a Location header`, {
          url,
          status: res.status,
          isRetryable: false,
        });
      return fetchBytes(new URL(location, url).toString());
    }
    if (res.status !== 200)
      throw new EngineCallError(`${url}: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`, {
        url,
        status: res.status,
      });
    if ((res.headers.get('content-type') ?? '').includes('application/json')) {
      const body = (await res.json()) as { url?: unknown };
      if (typeof body.url !== 'string')
        throw new EngineCallError(`${url}: malformed reply: missing "url"`, { url, isRetryable: false });
      return fetchBytes(body.url);
    }
    return Buffer.from(await res.arrayBuffer());
  }
  throw new EngineCallError(`checkpoint archive not found: ${last}`, { status: 404, isRetryable: false });
}

/** GET a (signed) URL without credentials. */
async function fetchBytes(url: string): Promise<Buffer> {
  const res = await fetch(url);
  if (!res.ok)
    throw new EngineCallError(`${url.split('?')[0]}: HTTP ${res.status} downloading the checkpoint archive`, {
      url: url.split('?')[0],
      status: res.status,
    });
  return Buffer.from(await res.arrayBuffer());
}

/** The regular files of a ustar/GNU tar archive, by path. */
export function untar(tar: Buffer): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  let longName: string | undefined;
  for (let off = 0; off + 512 <= tar.length;) {
    const header = tar.subarray(off, off + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, len: number) =>
      header
        .subarray(start, start + len)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1) || '0';
    const prefix = field(345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    longName = undefined;
    const data = tar.subarray(off + 512, off + 512 + size);
    if (type === 'L') longName = data.toString('utf8').replace(/\0.*$/s, '');
    else if (type === '0' || type === '7') files.set(name.replace(/^\.\//, ''), Buffer.from(data));
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

interface TensorInfo {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** Parse a safetensors file into its tensors (raw bytes) and metadata. */
export function readSafetensors(file: Buffer): {
  tensors: Map<string, { dtype: string; shape: number[]; data: Buffer }>;
  metadata?: Record<string, string>;
} {
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    TensorInfo | Record<string, string>
  >;
  const body = file.subarray(8 + n);
  const tensors = new Map<string, { dtype: string; shape: number[]; data: Buffer }>();
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const t = info as TensorInfo;
    tensors.set(name, { dtype: t.dtype, shape: t.shape, data: body.subarray(t.data_offsets[0], t.data_offsets[1]) });
  }
  return { tensors, metadata: header.__metadata__ as Record<string, string> | undefined };
}

/** Write tensors as a safetensors file (header padded to 8 bytes, data in insertion order). */
export function writeSafetensors(
  tensors: Map<string, { dtype: string; shape: number[]; data: Buffer }>,
  metadata?: Record<string, string>,
): Buffer {
  const header: Record<string, unknown> = metadata ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const [name, t] of tensors) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  return Buffer.concat([size, Buffer.from(json), ...[...tensors.values()].map((t) => t.data)]);
}

/**
 * Tinker adapter keys → PEFT keys (tinker-cookbook@9dfcc3a weights/_adapter.py `_convert_adapter`,
 * `_add_peft_weight`, `_expand_expert_weights`, `_build_peft_config`; _merge_utils.py
 * `build_name_remaps`): strip `base_model.model.`, `model.unembed_tokens` → `lm_head` (tied:
 * `model.embed_tokens`), optional `model.` → `model.language_model.`, 3-D `experts.w1/w3/w2` →
 * per-expert `experts.{i}.gate_proj/up_proj/down_proj`, then re-prefix `base_model.model.`.
 */
export function convertToPeft(
  weights: Buffer,
  adapterConfig: Record<string, unknown>,
  options: Pick<AdapterOptions, 'baseModel' | 'tiedEmbeddings' | 'languageModelPrefix'>,
): { weights: Buffer; config: Record<string, unknown> } {
  for (const key of ['r', 'lora_alpha'])
    if (adapterConfig[key] === undefined)
      throw new EngineCallError(`adapter_config.json: missing required key "${key}"`, { isRetryable: false });
  const { tensors } = readSafetensors(weights);
  const remaps: Array<[string, string]> = [
    ['base_model.model.', ''],
    ['model.unembed_tokens', options.tiedEmbeddings ? 'model.embed_tokens' : 'lm_head'],
  ];
  if (options.languageModelPrefix) remaps.push(['model.', 'model.language_model.']);
  const out = new Map<string, { dtype: string; shape: number[]; data: Buffer }>();
  const targets = new Set<string>();
  const add = (
    moduleKey: string,
    a: { dtype: string; shape: number[]; data: Buffer },
    b: { dtype: string; shape: number[]; data: Buffer },
  ) => {
    const module = moduleKey.replace(/\.weight$/, '');
    const keyA = `base_model.model.${module}.lora_A.weight`;
    if (out.has(keyA))
      throw new EngineCallError(`adapter conversion: two adapter weights map to ${keyA}`, { isRetryable: false });
    out.set(keyA, a);
    out.set(`base_model.model.${module}.lora_B.weight`, b);
    targets.add(module.slice(module.lastIndexOf('.') + 1));
  };
  for (const keyA of [...tensors.keys()].filter((k) => k.includes('.lora_A'))) {
    const base = keyA.replace('.lora_A', '');
    const a = tensors.get(keyA)!;
    const b = tensors.get(keyA.replace('.lora_A', '.lora_B'));
    if (!b) throw new EngineCallError(`adapter conversion: ${keyA} has no lora_B`, { isRetryable: false });
    let target = remaps.reduce((k, [from, to]) => k.split(from).join(to), base);
    if (!base.includes('.experts')) {
      add(target, a, b);
      continue;
    }
    for (const [from, to] of [
      ['.w1.weight', '.gate_proj.weight'],
      ['.w3.weight', '.up_proj.weight'],
      ['.w2.weight', '.down_proj.weight'],
    ])
      target = target.replace(from, to);
    if (a.data.length === 0 && b.data.length === 0) continue;
    expandExperts(target, a, b, add);
  }
  if (!out.size)
    throw new EngineCallError('adapter conversion: no LoRA weights (no keys containing ".lora_A")', {
      isRetryable: false,
    });
  const config = {
    peft_type: 'LORA',
    auto_mapping: null,
    base_model_name_or_path: options.baseModel,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    lora_alpha: adapterConfig.lora_alpha,
    lora_dropout: 0,
    modules_to_save: null,
    r: adapterConfig.r,
    rank_pattern: {},
    alpha_pattern: {},
    target_modules: [...targets].sort(),
    task_type: 'CAUSAL_LM',
  };
  return { weights: writeSafetensors(out), config };
}

/** Split 3-D (experts, ·, ·) LoRA tensors into per-expert 2-D ones; a single shared expert is broadcast. */
function expandExperts(
  target: string,
  a: { dtype: string; shape: number[]; data: Buffer },
  b: { dtype: string; shape: number[]; data: Buffer },
  add: (
    key: string,
    a: { dtype: string; shape: number[]; data: Buffer },
    b: { dtype: string; shape: number[]; data: Buffer },
  ) => void,
): void {
  if (a.shape.length !== 3 || b.shape.length !== 3)
    throw new EngineCallError(
      `adapter conversion: expert LoRA weights must be 3-D, got lora_A ${JSON.stringify(a.shape)}, lora_B ${JSON.stringify(b.shape)} for ${target}`,
      { isRetryable: false },
    );
  const experts = Math.max(a.shape[0], b.shape[0]);
  const slice = (t: { dtype: string; shape: number[]; data: Buffer }, i: number) => {
    const per = t.data.length / t.shape[0];
    const e = t.shape[0] === 1 ? 0 : i;
    return { dtype: t.dtype, shape: t.shape.slice(1), data: Buffer.from(t.data.subarray(e * per, (e + 1) * per)) };
  };
  for (let i = 0; i < experts; i++) add(target.replace('.experts', `.experts.${i}`), slice(a, i), slice(b, i));
}

/** Read a converted adapter back (tests, debugging). */
export function readAdapterDir(dir: string): {
  config: Record<string, unknown>;
  tensors: ReturnType<typeof readSafetensors>['tensors'];
} {
  return {
    config: JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>,
    tensors: readSafetensors(readFileSync(join(dir, 'adapter_model.safetensors'))).tensors,
  };
}
