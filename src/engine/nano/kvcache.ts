/**
 * Paged KV cache with prefix sharing. K and V live in page pools of shape [pages, L, P, C] (P tokens
 * per page). A sequence is a list of page ids and a length. fork() gives children the parent's pages
 * by reference (refcount++); the first write into a page that is shared copies it (copy-on-write), so
 * only a partially filled last page is ever copied. free() releases pages whose refcount reaches 0.
 * Counters (pagesAllocated, pagesCopied, pagesInUse) make sharing testable.
 */

interface Sequence {
  pages: number[];
  length: number;
}

export class PagedKVCache {
  k: Float32Array;
  v: Float32Array;
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
    this.k = new Float32Array(0);
    this.v = new Float32Array(0);
    this.refcount = new Int32Array(0);
    this.grow(initialPages);
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

  private grow(pages: number): void {
    const newCap = this.capacity + pages;
    const k = new Float32Array(newCap * this.pageFloats);
    const v = new Float32Array(newCap * this.pageFloats);
    k.set(this.k);
    v.set(this.v);
    const rc = new Int32Array(newCap);
    rc.set(this.refcount);
    for (let p = newCap - 1; p >= this.capacity; p--) this.freePages.push(p);
    this.k = k;
    this.v = v;
    this.refcount = rc;
    this.capacity = newCap;
  }

  private allocPage(): number {
    if (!this.freePages.length) this.grow(Math.max(16, this.capacity));
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

  /**
   * Reserve the slot for the next position of `id` (appending), copying a shared page first.
   * Returns the float offset of (page, layer 0, slot) in k/v; add layer·P·C for other layers.
   */
  appendSlot(id: number): number {
    const s = this.seq(id);
    const pos = s.length;
    const pageIndex = Math.floor(pos / this.pageSize);
    const slot = pos % this.pageSize;
    if (pageIndex === s.pages.length) {
      s.pages.push(this.allocPage());
    } else {
      const page = s.pages[pageIndex];
      if (this.refcount[page] > 1) {
        const copy = this.allocPage();
        const F = this.pageFloats;
        this.k.copyWithin(copy * F, page * F, page * F + F);
        this.v.copyWithin(copy * F, page * F, page * F + F);
        this.refcount[page]--;
        s.pages[pageIndex] = copy;
        this.pagesCopied++;
      }
    }
    s.length++;
    return (s.pages[pageIndex] * this.L * this.pageSize + slot) * this.C;
  }

  /** Float offset of position `pos` of `id` at layer `layer` (the same for k and v). */
  offset(id: number, pos: number, layer: number): number {
    const s = this.seq(id);
    const page = s.pages[Math.floor(pos / this.pageSize)];
    return ((page * this.L + layer) * this.pageSize + (pos % this.pageSize)) * this.C;
  }

  /** Page ids of a sequence (read-only use). */
  pagesOf(id: number): readonly number[] {
    return this.seq(id).pages;
  }
}
