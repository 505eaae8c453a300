/**
 * LoRA adapters served over one shared base model, as vLLM serves them (
 * vllm-project/vllm@4fe4500 openai/models/serving.py, openai/cli_args.py LoRAParserAction): adapters are
 * registered by name and path (`--lora-modules`, `/v1/load_lora_adapter`), a request's `model` selects
 * one, and `/v1/models` lists them. Each loaded adapter is a PEFT directory validated against the base
 * (errors name the file and tensor) with its own NanoSampler. At most `maxLoras` adapters are held in
 * memory (vLLM's CPU LoRA cache): the least recently used is dropped and read again from its path when
 * next asked for. Adapters and their samplers live in ordinary garbage-collected arrays, never in the
 * kernels' arena (which never frees), so loading and unloading repeatedly does not grow memory.
 */
import { existsSync, statSync } from 'node:fs';
import { ArborError } from '../../core/errors.js';
import { adapterSampler, isPeftAdapterDir, type NanoModel, type NanoSampler } from '../../engine/open.js';
import { BadRequest, NotFound } from '../validate.js';

/** One `--lora-modules` entry (vLLM's LoRAModulePath). */
export interface LoraModulePath {
  name: string;
  path: string;
  /** The base model the adapter belongs to (must be the served one when given). */
  baseModelName?: string;
}

/**
 * `--lora-modules` values as vLLM parses them: `name=path` (an item with `=` and no `,`), else JSON
 * `{"name", "path", "base_model_name"?}`. Errors name the item.
 */
export function parseLoraModules(items: readonly string[]): LoraModulePath[] {
  return items.map((item) => {
    if (item.includes('=') && !item.includes(',')) {
      const at = item.indexOf('=');
      const name = item.slice(0, at);
      const path = item.slice(at + 1);
      if (!name || !path) throw new ArborError(`--lora-modules: "${item}" must be NAME=PATH`);
      return { name, path };
    }
    let json: unknown;
    try {
      json = JSON.parse(item);
    } catch {
      throw new ArborError(`--lora-modules: "${item}" is neither NAME=PATH nor JSON {"name": ..., "path": ...}`);
    }
    const o = (json ?? {}) as { name?: unknown; path?: unknown; base_model_name?: unknown };
    if (typeof o.name !== 'string' || !o.name || typeof o.path !== 'string' || !o.path) {
      throw new ArborError(`--lora-modules: ${item} needs string fields "name" and "path"`);
    }
    if (o.base_model_name !== undefined && o.base_model_name !== null && typeof o.base_model_name !== 'string') {
      throw new ArborError(`--lora-modules: ${item}: "base_model_name" must be a string`);
    }
    return { name: o.name, path: o.path, baseModelName: (o.base_model_name as string | null) ?? undefined };
  });
}

export interface LoraRegistryOptions {
  /** The served base model's name (an adapter's `parent`). */
  baseName: string;
  /** Adapters held in memory at once (vLLM --max-loras / --max-cpu-loras); more are read again on use. */
  maxLoras: number;
  /** Largest adapter rank accepted (vLLM --max-lora-rank). */
  maxLoraRank: number;
  pageSize?: number;
}

/** One registered adapter: its path, and its sampler while it is held in memory. */
interface Entry {
  path: string;
  parent: string;
  sampler?: NanoSampler;
}

/** An adapter as /v1/models lists it. */
export interface LoraCard {
  name: string;
  path: string;
  parent: string;
}

export class LoraRegistry {
  /** Registered adapters in registration order; `used` keeps the held ones, least recently used first. */
  private readonly entries = new Map<string, Entry>();
  private readonly used: string[] = [];
  /** Adapter loads from disk (registration and reloads after eviction), for tests. */
  loads = 0;

  constructor(
    readonly model: NanoModel,
    readonly options: LoraRegistryOptions,
  ) {}

  /**
   * vLLM's load_lora_adapter: read and validate the adapter at `path` (404 when there is none, 400 when
   * it does not fit the base), then register it; an existing name needs `inplace`.
   */
  load(name: string, path: string, options: { inplace?: boolean; baseModelName?: string } = {}): void {
    if (!name || !path) throw new BadRequest("Both 'lora_name' and 'lora_path' must be provided.");
    if (!options.inplace && this.entries.has(name)) {
      const how = "If you want to load the adapter in place, set 'load_inplace' to True.";
      throw new BadRequest(`The lora adapter '${name}' has already been loaded. ${how}`);
    }
    if (options.baseModelName !== undefined && options.baseModelName !== this.options.baseName) {
      const [given, served] = [options.baseModelName, this.options.baseName].map((n) => JSON.stringify(n));
      const why = `base_model_name ${given} is not the served model ${served}`;
      throw new BadRequest(`Loading lora ${name} failed: ${why}`);
    }
    const sampler = this.open(name, path);
    this.drop(name);
    this.entries.set(name, { path, parent: this.options.baseName, sampler });
    this.touch(name);
  }

  /** vLLM's unload_lora_adapter (404 when no adapter has that name). */
  unload(name: string): void {
    if (!name) throw new BadRequest("'lora_name' needs to be provided to unload a LoRA adapter.");
    if (!this.entries.has(name)) throw new NotFound(`The lora adapter '${name}' cannot be found.`);
    this.drop(name);
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** The sampler of adapter `name` (read again from its path if it was dropped from memory). */
  sampler(name: string): NanoSampler | undefined {
    const entry = this.entries.get(name);
    if (!entry) return undefined;
    entry.sampler ??= this.open(name, entry.path);
    this.touch(name);
    return entry.sampler;
  }

  /** Registered adapters, in registration order. */
  cards(): LoraCard[] {
    return [...this.entries].map(([name, e]) => ({ name, path: e.path, parent: e.parent }));
  }

  /** Adapters currently held in memory. */
  get held(): number {
    return this.used.length;
  }

  private open(name: string, path: string): NanoSampler {
    // vLLM: LoRAAdapterNotFoundError → 404; anything else about the adapter → 400
    const isDir = existsSync(path) && statSync(path).isDirectory();
    if (!isDir || !isPeftAdapterDir(path)) {
      throw new NotFound(`Loading lora ${name} failed: No adapter found for ${path}`);
    }
    let sampler: NanoSampler;
    try {
      sampler = adapterSampler(this.model, path, { pageSize: this.options.pageSize });
    } catch (error) {
      throw new BadRequest(`Loading lora ${name} failed: ${(error as Error).message}`, { cause: error });
    }
    const rank = sampler.adapter!.rank;
    if (rank > this.options.maxLoraRank) {
      const why = `LoRA rank ${rank} is greater than max_lora_rank ${this.options.maxLoraRank} (--max-lora-rank)`;
      throw new BadRequest(`Loading lora ${name} failed: ${why}`);
    }
    this.loads++;
    return sampler;
  }

  /** Mark `name` most recently used; drop the samplers of the least recently used beyond maxLoras. */
  private touch(name: string): void {
    const at = this.used.indexOf(name);
    if (at >= 0) this.used.splice(at, 1);
    this.used.push(name);
    while (this.used.length > this.options.maxLoras) {
      const evicted = this.entries.get(this.used.shift()!);
      if (evicted) evicted.sampler = undefined;
    }
  }

  private drop(name: string): void {
    this.entries.delete(name);
    const at = this.used.indexOf(name);
    if (at >= 0) this.used.splice(at, 1);
  }
}
