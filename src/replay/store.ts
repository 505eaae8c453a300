/**
 * The rollout store: where trees live between the producers that grow them and the learner that
 * trains on them: partial trees to continue, and ready (complete, scored) trees waiting for their
 * step. FIFO by put(); bounded in memory: beyond `maxInMemory` entries the oldest spill to an
 * append-only JSONL scratch file and are read back by byte offset (without a spill file the bound is
 * not enforced: all entries stay in memory). save()/load() write and read the whole store (spilled
 * entries included) as JSONL, atomically, for checkpoints. It does not decide what to train on.
 * Entries are held by reference until spilled: do not mutate an entry after put().
 */
import { closeSync, ftruncateSync, openSync, readFileSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { z } from 'zod';
import { DataError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { tokenVersions, treeFromJSON, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';

/** partial = unfinished (to be continued); ready = complete and scored. */
export type EntryStatus = 'partial' | 'ready';

export interface StoreEntry {
  /** The rollout tree. */
  tree: RolloutTree;
  /** The prompt the tree was grown from (needed to score or continue it). */
  item: TaskItem;
  /** partial = unfinished (to be continued); ready = complete and scored. */
  status: EntryStatus;
  /** The learner step this ready tree is assigned to (null = not yet assigned). */
  batchStep: number | null;
}

export interface RolloutStoreOptions {
  /** Entries kept in memory; older ones spill to `spillFile` (not enforced without one). */
  maxInMemory: number;
  /** Scratch JSONL file for spilled entries (truncated/created when the store is constructed). */
  spillFile?: string;
}

export interface StoreFilter {
  /** Match this status; undefined = any. */
  status?: EntryStatus;
  /** Match this batch step (null = unassigned); undefined = any. */
  batchStep?: number | null;
  /** At most this many entries (the oldest matching); undefined = all. */
  limit?: number;
}

export const storeOptionsSchema = z
  .object({
    maxInMemory: z
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(1024)
      .describe('trees kept in memory; older ones spill to <run>/store-spill.jsonl'),
  })
  .strict();

/** An entry in memory, or its location in the spill file (with the fields filters need). */
type Slot = { entry: StoreEntry } | { offset: number; length: number; status: EntryStatus; batchStep: number | null };

export class RolloutStore {
  private slots: Slot[] = [];
  private memCount = 0;
  private spillFd: number | undefined;
  private spillEnd = 0;

  constructor(readonly options: RolloutStoreOptions) {
    if (options.spillFile) writeFileSync(options.spillFile, '');
  }

  /** Entries held in memory. */
  get inMemory(): number {
    return this.memCount;
  }

  /** Entries held in the spill file. */
  get spilled(): number {
    return this.slots.length - this.memCount;
  }

  /** Append entries (FIFO order kept); spills the oldest in-memory ones beyond maxInMemory. */
  put(entries: StoreEntry[]): void {
    for (const entry of entries) this.slots.push({ entry });
    this.memCount += entries.length;
    this.spill();
  }

  /** Remove and return the matching entries, oldest first. */
  take(filter: StoreFilter = {}): StoreEntry[] {
    const picked = this.match(filter);
    const out = picked.map((s) => this.read(s));
    const set = new Set(picked);
    this.slots = this.slots.filter((s) => !set.has(s));
    this.memCount = this.slots.filter((s) => 'entry' in s).length;
    if (this.spilled === 0 && this.spillEnd > 0 && this.spillFd !== undefined) {
      ftruncateSync(this.spillFd, 0); // nothing left in the scratch file: start it over
      this.spillEnd = 0;
    }
    return out;
  }

  /** The matching entries, oldest first, without removing them. */
  peek(filter: StoreFilter = {}): StoreEntry[] {
    return this.match(filter).map((s) => this.read(s));
  }

  /** Number of matching entries. */
  count(filter: Omit<StoreFilter, 'limit'> = {}): number {
    return this.match(filter).length;
  }

  /** currentVersion − the oldest weight version among the entry's policy tokens (0 without tokens). */
  staleness(entry: StoreEntry, currentVersion: number): number {
    let oldest = Infinity;
    for (const v of tokenVersions(entry.tree)) if (v < oldest) oldest = v;
    return oldest === Infinity ? 0 : currentVersion - oldest;
  }

  /** Entries (not removed) whose staleness at `currentVersion` exceeds `maxStaleness`, oldest first. */
  stale(currentVersion: number, maxStaleness: number): StoreEntry[] {
    return this.peek().filter((e) => this.staleness(e, currentVersion) > maxStaleness);
  }

  /** {staleness: policy tokens} over the trees at `currentVersion`, each token at its own version. */
  static stalenessHistogram(trees: RolloutTree[], currentVersion: number): Record<number, number> {
    const out: Record<number, number> = {};
    for (const t of trees)
      for (const v of tokenVersions(t)) out[currentVersion - v] = (out[currentVersion - v] ?? 0) + 1;
    return out;
  }

  /** Write every entry (spilled ones included) as JSONL in FIFO order, atomically (file.tmp, then rename). */
  save(file: string): void {
    const text = this.slots.map((s) => JSON.stringify(this.read(s)) + '\n').join('');
    writeFileAtomic(file, text);
  }

  /** Read a store written by save(); errors are DataErrors naming `file:line N`. */
  static load(file: string, options: RolloutStoreOptions): RolloutStore {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (cause) {
      throw new DataError(
        `${file}: cannot read the rollout store (${(cause as Error).message})`,
        file,
        undefined,
        undefined,
        { cause },
      );
    }
    const entries: StoreEntry[] = [];
    text.split('\n').forEach((line, i) => {
      if (line.trim()) entries.push(parseEntry(line, file, i + 1));
    });
    const store = new RolloutStore(options);
    store.put(entries);
    return store;
  }

  /** Close the spill file handle (it is reopened if a spilled entry is read again). */
  close(): void {
    if (this.spillFd !== undefined) closeSync(this.spillFd);
    this.spillFd = undefined;
  }

  private match(filter: StoreFilter): Slot[] {
    const out: Slot[] = [];
    for (const s of this.slots) {
      if (filter.limit !== undefined && out.length >= filter.limit) break;
      const { status, batchStep } = 'entry' in s ? s.entry : s;
      if (filter.status !== undefined && status !== filter.status) continue;
      if (filter.batchStep !== undefined && batchStep !== filter.batchStep) continue;
      out.push(s);
    }
    return out;
  }

  private fd(): number {
    this.spillFd ??= openSync(this.options.spillFile!, 'r+');
    return this.spillFd;
  }

  private read(slot: Slot): StoreEntry {
    if ('entry' in slot) return slot.entry;
    const buffer = Buffer.alloc(slot.length);
    const n = readSync(this.fd(), buffer, 0, slot.length, slot.offset);
    if (n !== slot.length)
      throw new DataError(
        `${this.options.spillFile}: spill file truncated at byte ${slot.offset}`,
        this.options.spillFile,
      );
    return JSON.parse(buffer.toString('utf8')) as StoreEntry;
  }

  /** Move the oldest in-memory entries to the spill file until at most maxInMemory remain. */
  private spill(): void {
    if (!this.options.spillFile) return;
    for (let i = 0; i < this.slots.length && this.memCount > this.options.maxInMemory; i++) {
      const s = this.slots[i];
      if (!('entry' in s)) continue;
      const bytes = Buffer.from(JSON.stringify(s.entry) + '\n', 'utf8');
      writeSync(this.fd(), bytes, 0, bytes.length, this.spillEnd);
      this.slots[i] = {
        offset: this.spillEnd,
        length: bytes.length - 1,
        status: s.entry.status,
        batchStep: s.entry.batchStep,
      };
      this.spillEnd += bytes.length;
      this.memCount--;
    }
  }
}

function parseEntry(line: string, file: string, lineNo: number): StoreEntry {
  const where = `${file}:line ${lineNo}`;
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(line) as Record<string, unknown>;
  } catch (cause) {
    throw new DataError(`${where}: invalid JSON`, file, lineNo, undefined, { cause });
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new DataError(`${where}: not an object`, file, lineNo);
  if (raw.status !== 'partial' && raw.status !== 'ready')
    throw new DataError(`${where}: field "status" must be "partial" or "ready"`, file, lineNo, 'status');
  if (raw.batchStep !== null && !Number.isInteger(raw.batchStep))
    throw new DataError(`${where}: field "batchStep" must be an integer or null`, file, lineNo, 'batchStep');
  const item = raw.item as TaskItem | undefined;
  if (
    !item ||
    typeof item !== 'object' ||
    typeof item.id !== 'string' ||
    typeof item.prompt !== 'string' ||
    typeof item.answer !== 'string'
  ) {
    throw new DataError(`${where}: field "item" must be a task item {id, prompt, answer}`, file, lineNo, 'item');
  }
  if (!raw.tree || typeof raw.tree !== 'object')
    throw new DataError(`${where}: field "tree" must be an object`, file, lineNo, 'tree');
  let tree: RolloutTree;
  try {
    tree = treeFromJSON(JSON.stringify(raw.tree), where);
  } catch (cause) {
    const field = cause instanceof DataError && cause.field ? `tree.${cause.field}` : 'tree';
    const msg = cause instanceof DataError ? cause.message : `${where}: invalid tree (${(cause as Error).message})`;
    throw new DataError(msg, file, lineNo, field, { cause });
  }
  return { tree, item, status: raw.status, batchStep: raw.batchStep as number | null };
}
