/**
 * Paged KV cache with prefix sharing. K and V live in pages of shape [L, P, C] (P tokens per page,
 * C = the key/value width NKV·hd), allocated in blocks of pages that are never moved or copied when
 * the cache grows (a model with gigabytes of KV state never holds two copies). A sequence is a list of
 * page ids and a length. fork() gives children the parent's pages by reference (refcount++); the first
 * write into a page that is shared copies it (copy-on-write), so only a partially filled last page is
 * ever copied. free() releases pages whose refcount reaches 0. Counters (pagesAllocated, pagesCopied,
 * pagesInUse) make sharing testable.
 */

interface Sequence {
  pages: number[];
  length: number;
}

/** Floats per block at most (a block is one allocation of whole pages). */
const BLOCK_FLOATS = 1 << 24;

export class PagedKVCache {
  private kBlocks: Float32Array[] = [];
  private vBlocks: Float32Array[] = [];
  private readonly pagesPerBlock: number;
  private refcount: Int32Array;
  private freePages: number[] = [];
  private capacity = 0;
  private readonly seqs = new Map<number, Sequence>();
  private nextSeq = 1;
  /** Pages handed out from the free list over the cache's life. */
  pagesAllocated = 0;
  /** Copy-on-write page copies. */
  pagesCopied = 0;

  constructor(readonly L: number, readonly C: number, readonly pageSize: number, initialPages = 64) {
    this.refcount = new Int32Array(0);
    this.pagesPerBlock = Math.max(1, Math.floor(BLOCK_FLOATS / this.pageFloats));
    this.grow(Math.min(initialPages, this.pagesPerBlock));
  }

  /** Floats per page (all layers). */
  get pageFloats(): number {
    return this.L * this.pageSize * this.C;
  }

  /** Pages currently referenced by at least one sequence. */
  get pagesInUse(): number {
    return this.capacity - this.freePages.length;
  }

  get sequenceCount(): number {
    return this.seqs.size;
  }

  /** Add `pages` pages: the last block is filled up to pagesPerBlock first (a fresh, larger block), then new blocks. */
  private grow(pages: number): void {
    const newCap = this.capacity + pages;
    for (let b = Math.floor(this.capacity / this.pagesPerBlock); b * this.pagesPerBlock < newCap; b++) {
      const pagesInBlock = Math.min(this.pagesPerBlock, newCap - b * this.pagesPerBlock);
      const have = this.kBlocks[b] ? this.kBlocks[b].length / this.pageFloats : 0;
      if (have >= pagesInBlock) continue;
      // a partial last block is replaced by a larger one (its pages copied once; full blocks never move)
      const k = new Float32Array(pagesInBlock * this.pageFloats);
      const v = new Float32Array(pagesInBlock * this.pageFloats);
      if (this.kBlocks[b]) {
        k.set(this.kBlocks[b]);
        v.set(this.vBlocks[b]);
      }
      this.kBlocks[b] = k;
      this.vBlocks[b] = v;
    }
    const rc = new Int32Array(newCap);
    rc.set(this.refcount);
    for (let p = newCap - 1; p >= this.capacity; p--) this.freePages.push(p);
    this.refcount = rc;
    this.capacity = newCap;
  }

  private allocPage(): number {
    if (!this.freePages.length) this.grow(Math.max(16, Math.min(this.capacity, this.pagesPerBlock)));
    const p = this.freePages.pop()!;
    this.refcount[p] = 1;
    this.pagesAllocated++;
    return p;
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
    for (const p of s.pages) {
      if (--this.refcount[p] === 0) this.freePages.push(p);
    }
    this.seqs.delete(id);
  }

  /** The K and V storage of page `p` ([L, P, C] from `offset` in `k`/`v`). */
  page(p: number): { k: Float32Array; v: Float32Array; offset: number } {
    const b = Math.floor(p / this.pagesPerBlock);
    return { k: this.kBlocks[b], v: this.vBlocks[b], offset: (p - b * this.pagesPerBlock) * this.pageFloats };
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
        const from = this.page(page);
        const to = this.page(copy);
        to.k.set(from.k.subarray(from.offset, from.offset + this.pageFloats), to.offset);
        to.v.set(from.v.subarray(from.offset, from.offset + this.pageFloats), to.offset);
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
    const { k: K, v: V, offset } = this.page(p);
    const at = offset + (layer * this.pageSize + (slot - p * this.pageSize)) * this.C;
    K.set(k, at);
    V.set(v, at);
  }

  /** Copy positions [0, T) of `id` at `layer` into contiguous kOut, vOut [T, C]. */
  gather(id: number, layer: number, T: number, kOut: Float32Array, vOut: Float32Array): void {
    const pages = this.seq(id).pages;
    const P = this.pageSize;
    const C = this.C;
    for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
      const n = Math.min(P, T - s0) * C;
      const { k, v, offset } = this.page(pages[pi]);
      const base = offset + layer * P * C;
      kOut.set(k.subarray(base, base + n), s0 * C);
      vOut.set(v.subarray(base, base + n), s0 * C);
    }
  }

  /** Page ids of a sequence (read-only use). */
  pagesOf(id: number): readonly number[] {
    return this.seq(id).pages;
  }
}
