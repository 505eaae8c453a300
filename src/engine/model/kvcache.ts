/**
 * Paged KV cache with prefix sharing. K and V live in pages of shape [L, P, C] (P tokens per page,
 * C = the key/value width NKV·hd) taken from a page pool whose blocks are never moved or copied when
 * it grows (a model with gigabytes of KV state never holds two copies). A sequence is a list of page
 * ids and a length. fork() gives children the parent's pages by reference (refcount++); the first
 * write into a page that is shared copies it (copy-on-write), so only a partially filled last page is
 * ever copied. free() returns pages whose refcount reaches 0 to the pool. Counters (pagesAllocated,
 * pagesCopied, pagesInUse) make sharing testable.
 * Storage: a cache attached to kernels with paged decode attention (`attach`, done by forwardRows
 * before the first page is taken) keeps its pages in kernel memory, where the kernel reads them in
 * place, from one pool per (kernels, L, P, C): pages one sampler frees serve the next (kernel memory
 * is never freed), and the pages of a cache that is garbage-collected go back too. Otherwise the cache
 * has its own pool of ordinary arrays.
 */
import type { Kernels } from '../kernels/types.js';

interface Sequence {
  pages: number[];
  length: number;
}

/** Floats per block at most (a block is one allocation of whole pages). */
const BLOCK_FLOATS = 1 << 24;

/** Pages of one geometry: page p's storage is kPages[p] / vPages[p], views [L, P, C] into blocks that never move. */
class KVPagePool {
  readonly kPages: Float32Array[] = [];
  readonly vPages: Float32Array[] = [];
  private readonly free: number[] = [];
  private readonly pagesPerBlock: number;

  constructor(
    readonly pageFloats: number,
    private readonly alloc: (n: number) => Float32Array,
  ) {
    this.pagesPerBlock = Math.max(1, Math.floor(BLOCK_FLOATS / pageFloats));
  }

  get capacity(): number {
    return this.kPages.length;
  }

  /** A free page id (lowest ids of a new block first); grows by a block when none is free. */
  acquire(minimumGrowth: number): number {
    if (!this.free.length) this.grow(Math.max(minimumGrowth, 16, Math.min(this.capacity, this.pagesPerBlock)));
    return this.free.pop()!;
  }

  release(page: number): void {
    this.free.push(page);
  }

  private grow(pages: number): void {
    for (let left = pages; left > 0;) {
      const n = Math.min(left, this.pagesPerBlock);
      const k = this.alloc(n * this.pageFloats);
      const v = this.alloc(n * this.pageFloats);
      const first = this.capacity;
      for (let i = 0; i < n; i++) {
        this.kPages.push(k.subarray(i * this.pageFloats, (i + 1) * this.pageFloats));
        this.vPages.push(v.subarray(i * this.pageFloats, (i + 1) * this.pageFloats));
      }
      for (let p = first + n - 1; p >= first; p--) this.free.push(p);
      left -= n;
    }
  }
}

/** The shared pools of each kernel backend, by geometry. */
const sharedPools = new WeakMap<Kernels, Map<string, KVPagePool>>();

/** Pages a garbage-collected cache still held go back to their pool. */
const returnPages = new FinalizationRegistry<{ pool: KVPagePool; held: Set<number> }>(({ pool, held }) => {
  for (const page of held) pool.release(page);
});

export class PagedKVCache {
  private pool: KVPagePool | undefined;
  private refcount = new Int32Array(0);
  /** Pages this cache holds a reference to (what returns to a shared pool if the cache is collected). */
  private readonly held = new Set<number>();
  private readonly seqs = new Map<number, Sequence>();
  private nextSeq = 1;
  /** Pages handed out from the pool over the cache's life. */
  pagesAllocated = 0;
  /** Copy-on-write page copies. */
  pagesCopied = 0;

  constructor(
    readonly L: number,
    readonly C: number,
    readonly pageSize: number,
    private readonly initialPages = 64,
  ) {}

  /** Floats per page (all layers). */
  get pageFloats(): number {
    return this.L * this.pageSize * this.C;
  }

  /** Pages currently referenced by at least one sequence. */
  get pagesInUse(): number {
    return this.held.size;
  }

  get sequenceCount(): number {
    return this.seqs.size;
  }

  /** Page p's K storage [L, P, C] (indexed by page id; for kernels.pagedDecodeAttention). */
  get kPages(): readonly Float32Array[] {
    return this.storage().kPages;
  }

  /** Page p's V storage [L, P, C]. */
  get vPages(): readonly Float32Array[] {
    return this.storage().vPages;
  }

  /**
   * Keep pages in `kernels`' memory when it has paged decode attention (a pool shared by every cache of
   * this geometry on those kernels). Only before the first page is taken; afterwards, and for other
   * kernels, a no-op.
   */
  attach(kernels: Kernels): void {
    if (this.pool || !kernels.pagedDecodeAttention) return;
    let pools = sharedPools.get(kernels);
    if (!pools) sharedPools.set(kernels, (pools = new Map()));
    const key = `${this.L}:${this.pageSize}:${this.C}`;
    let pool = pools.get(key);
    if (!pool) pools.set(key, (pool = new KVPagePool(this.pageFloats, (n) => kernels.alloc(n))));
    this.pool = pool;
    returnPages.register(this, { pool, held: this.held });
  }

  private storage(): KVPagePool {
    return (this.pool ??= new KVPagePool(this.pageFloats, (n) => new Float32Array(n)));
  }

  private allocPage(): number {
    const pool = this.storage();
    const p = pool.acquire(this.pagesAllocated === 0 ? this.initialPages : 0);
    if (p >= this.refcount.length) {
      const rc = new Int32Array(Math.max(pool.capacity, 2 * this.refcount.length));
      rc.set(this.refcount);
      this.refcount = rc;
    }
    this.refcount[p] = 1;
    this.held.add(p);
    this.pagesAllocated++;
    return p;
  }

  private unref(page: number): void {
    if (--this.refcount[page] > 0) return;
    this.held.delete(page);
    this.pool!.release(page);
  }

  private seq(id: number): Sequence {
    const s = this.seqs.get(id);
    if (!s) throw new Error(`kv cache: unknown sequence ${id}`);
    return s;
  }

  createSequence(): number {
    const id = this.nextSeq++;
    this.seqs.set(id, { pages: [], length: 0 });
    return id;
  }

  length(id: number): number {
    return this.seq(id).length;
  }

  /** n children sharing all of the parent's pages. The parent stays valid. */
  fork(id: number, n: number): number[] {
    const parent = this.seq(id);
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      for (const p of parent.pages) this.refcount[p]++;
      const child = this.nextSeq++;
      this.seqs.set(child, { pages: parent.pages.slice(), length: parent.length });
      out.push(child);
    }
    return out;
  }

  free(id: number): void {
    const s = this.seqs.get(id);
    if (!s) return;
    for (const p of s.pages) this.unref(p);
    this.seqs.delete(id);
  }

  /** The K and V storage of page `p` ([L, P, C] from `offset` in `k`/`v`). */
  page(p: number): { k: Float32Array; v: Float32Array; offset: number } {
    const pool = this.storage();
    return { k: pool.kPages[p], v: pool.vPages[p], offset: 0 };
  }

  /**
   * Reserve the slot for the next position of `id` (appending), copying a shared page first.
   * Returns the slot: page · P + position within the page (for `write`).
   */
  appendSlot(id: number): number {
    const s = this.seq(id);
    const pos = s.length;
    const pageIndex = Math.floor(pos / this.pageSize);
    if (pageIndex === s.pages.length) {
      s.pages.push(this.allocPage());
    } else {
      const page = s.pages[pageIndex];
      if (this.refcount[page] > 1) {
        const copy = this.allocPage();
        const pool = this.pool!;
        pool.kPages[copy].set(pool.kPages[page]);
        pool.vPages[copy].set(pool.vPages[page]);
        this.refcount[page]--;
        s.pages[pageIndex] = copy;
        this.pagesCopied++;
      }
    }
    s.length++;
    return s.pages[pageIndex] * this.pageSize + (pos % this.pageSize);
  }

  /** Store one position's key and value rows [C] of `layer` at `slot` (from appendSlot). */
  write(slot: number, layer: number, k: Float32Array, v: Float32Array): void {
    const p = Math.floor(slot / this.pageSize);
    const at = (layer * this.pageSize + (slot - p * this.pageSize)) * this.C;
    const pool = this.storage();
    pool.kPages[p].set(k, at);
    pool.vPages[p].set(v, at);
  }

  /** Copy positions [0, T) of `id` at `layer` into contiguous kOut, vOut [T, C]. */
  gather(id: number, layer: number, T: number, kOut: Float32Array, vOut: Float32Array): void {
    const pages = this.seq(id).pages;
    const pool = this.storage();
    const P = this.pageSize;
    const C = this.C;
    for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
      const n = Math.min(P, T - s0) * C;
      const base = layer * P * C;
      kOut.set(pool.kPages[pages[pi]].subarray(base, base + n), s0 * C);
      vOut.set(pool.vPages[pages[pi]].subarray(base, base + n), s0 * C);
    }
  }

  /** Page ids of a sequence (read-only use). */
  pagesOf(id: number): readonly number[] {
    return this.seq(id).pages;
  }
}
