/**
 * Live refresh: the runs dir is polled (sizes and mtimes of each run's metrics.jsonl, summary.json and
 * trees/) while at least one browser listens; changed runs are pushed as server-sent events
 * (`event: runs`, data: JSON array of names). A run that stops writing turns from running to failed
 * after the live window, so every listener also gets a full refresh every `liveWindow`-ish minute.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunsDir } from './runs.js';

export class RunWatcher {
  private readonly clients = new Set<ServerResponse>();
  private readonly prints = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private ticks = 0;

  constructor(
    readonly runs: RunsDir,
    readonly pollMs: number,
  ) {}

  subscribe(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.write('retry: 2000\n\n');
    this.clients.add(res);
    req.on('close', () => {
      this.clients.delete(res);
      if (!this.clients.size) this.stop();
    });
    if (!this.timer) {
      this.scan(); // baseline
      this.timer = setInterval(() => this.tick(), this.pollMs);
    }
  }

  /** Names of the runs whose files changed since the last scan (new and removed runs included). */
  scan(): string[] {
    const changed: string[] = [];
    const names = new Set(this.runs.names());
    for (const name of names) {
      const print = this.runs.fingerprint(name);
      if (this.prints.get(name) !== print) changed.push(name);
      this.prints.set(name, print);
    }
    for (const name of [...this.prints.keys()])
      if (!names.has(name)) {
        this.prints.delete(name);
        changed.push(name);
      }
    return changed;
  }

  private tick(): void {
    let changed: string[];
    try {
      changed = this.scan();
    } catch {
      return; // the runs dir is being rewritten: next tick
    }
    const periodic = ++this.ticks % Math.max(1, Math.round(30_000 / this.pollMs)) === 0;
    if (!changed.length && !periodic) return;
    const data = `event: runs\ndata: ${JSON.stringify(changed)}\n\n`;
    for (const c of this.clients) c.write(data);
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.stop();
    for (const c of this.clients) c.end();
    this.clients.clear();
  }
}
