/**
 * The `arbor ui` HTTP server (127.0.0.1 only, GET only): the app shell and its assets, a JSON API over
 * the runs dir, and server-sent events when a run's files change.
 *
 *   GET /api/runs                         RunInfo[]
 *   GET /api/runs/<name>                  RunInfo
 *   GET /api/runs/<name>/config           config.resolved.yaml (text)
 *   GET /api/runs/<name>/summary          summary.json (null before the run ends)
 *   GET /api/runs/<name>/metrics?offset=B MetricsChunk: numeric fields of complete lines from byte B
 *   GET /api/runs/<name>/trees/<step>     TreeStep: one step's trees, decoded
 *   GET /api/events                       SSE: `runs` events with the names of runs that changed
 *
 * Errors are JSON `{error}`: 404 for what does not exist, 422 for a damaged file (the message names it),
 * 403 for a Host header other than 127.0.0.1 / localhost (DNS rebinding).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ArborError, DataError } from '../../core/errors.js';
import { INDEX_HTML, readAsset, type AssetName } from './assets.js';
import { RunsDir } from './runs.js';
import { runTokenizer, type RunTokenizer } from './tokenizer.js';
import { readTreeStep } from './trees.js';
import { RunWatcher } from './watch.js';

export interface UiServerOptions {
  runsDir: string;
  port?: number;
  /** How often the runs dir is checked for changes (ms). */
  pollMs?: number;
  /** A run without summary.json written to within this window is "running", else "failed" (ms). */
  liveWindowMs?: number;
}

export interface UiServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

const TYPES: Record<AssetName, string> = {
  'app.js': 'text/javascript',
  'report.js': 'text/javascript',
  'app.css': 'text/css',
};

class HttpError extends ArborError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, {
    'content-type': `${type}; charset=utf-8`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

const json = (res: ServerResponse, value: unknown) => send(res, 200, 'application/json', JSON.stringify(value ?? null));

export class UiHandler {
  private readonly tokenizers = new Map<string, RunTokenizer>();

  constructor(
    readonly runs: RunsDir,
    readonly watcher: RunWatcher,
  ) {}

  handle(req: IncomingMessage, res: ServerResponse): void {
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, `${req.method} not allowed`);
      // a page elsewhere that rebinds its own host name to 127.0.0.1 must not read the runs
      if (!/^(127\.0\.0\.1|localhost)(:\d+)?$/.test(req.headers.host ?? ''))
        throw new HttpError(
          403,
          `host ${JSON.stringify(req.headers.host ?? '')} refused: open http://127.0.0.1:<port>/`,
        );
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      this.route(decodeURIComponent(url.pathname), url.searchParams, req, res);
    } catch (error) {
      const status = error instanceof HttpError ? error.status : error instanceof DataError ? 422 : 500;
      if (!res.headersSent) send(res, status, 'application/json', JSON.stringify({ error: (error as Error).message }));
      else res.end();
    }
  }

  private route(path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): void {
    if (path === '/' || path === '/index.html') return send(res, 200, 'text/html', INDEX_HTML);
    if (path === '/favicon.ico') return void res.writeHead(204).end();
    const asset = /^\/(app\.js|report\.js|app\.css)$/.exec(path);
    if (asset) return send(res, 200, TYPES[asset[1] as AssetName], readAsset(asset[1] as AssetName));
    if (path === '/api/runs') return json(res, this.runs.list());
    if (path === '/api/events') return this.watcher.subscribe(req, res);
    const m = /^\/api\/runs\/([^/]+)(?:\/(config|summary|metrics|trees\/(\d{1,9})))?$/.exec(path);
    if (!m) throw new HttpError(404, `not found: ${path}`);
    const [, name, what, step] = m;
    if (!this.runs.dir(name)) throw new HttpError(404, `no run "${name}"`);
    if (!what) return json(res, this.runs.info(name));
    if (what === 'config') return send(res, 200, 'text/plain', this.runs.configText(name));
    if (what === 'summary') return json(res, this.runs.summary(name) ?? null);
    if (what === 'metrics') return json(res, this.runs.metrics(name, Number(query.get('offset') ?? 0)));
    if (!this.runs.treeSteps(name).includes(Number(step)))
      throw new HttpError(404, `run "${name}" logged no trees at step ${step}`);
    return json(res, readTreeStep(this.runs.need(name), Number(step), this.tokenizer(name)));
  }

  private tokenizer(name: string): RunTokenizer {
    let t = this.tokenizers.get(name);
    if (!t || t.source === 'default char tokenizer') {
      t = runTokenizer(this.runs.need(name));
      this.tokenizers.set(name, t);
    }
    return t;
  }
}

export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const runs = new RunsDir(options.runsDir, options.liveWindowMs);
  const watcher = new RunWatcher(runs, options.pollMs ?? 1000);
  const handler = new UiHandler(runs, watcher);
  const server = createServer((req, res) => handler.handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) =>
      reject(new ArborError(`arbor ui: cannot listen on 127.0.0.1:${options.port ?? 0}: ${e.message}`, { cause: e })),
    );
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    server,
    close: async () => {
      watcher.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
