/** The browser's side of the `arbor ui` JSON API (src/ui/server/server.ts) and its live events. */
import type { MetricsChunk, RunInfo, TreeStep } from '../types.js';

async function get(path: string): Promise<Response> {
  const res = await fetch(path, { cache: 'no-store' });
  if (!res.ok) {
    const body = await res.text();
    let message = body;
    try {
      message = (JSON.parse(body) as { error?: string }).error ?? body;
    } catch {
      // plain text
    }
    throw new Error(`${path}: ${res.status} ${message}`);
  }
  return res;
}

const enc = encodeURIComponent;

export const api = {
  runs: async (): Promise<RunInfo[]> => (await get('/api/runs')).json(),
  run: async (name: string): Promise<RunInfo> => (await get(`/api/runs/${enc(name)}`)).json(),
  config: async (name: string): Promise<string> => (await get(`/api/runs/${enc(name)}/config`)).text(),
  summary: async (name: string): Promise<Record<string, unknown> | null> =>
    (await get(`/api/runs/${enc(name)}/summary`)).json(),
  metrics: async (name: string, offset: number): Promise<MetricsChunk> =>
    (await get(`/api/runs/${enc(name)}/metrics?offset=${offset}`)).json(),
  trees: async (name: string, step: number): Promise<TreeStep> =>
    (await get(`/api/runs/${enc(name)}/trees/${step}`)).json(),
};

/** Calls `onChange(names)` whenever runs change on disk (server-sent events; the browser reconnects by itself). */
export function watchRuns(onChange: (names: string[]) => void): () => void {
  const source = new EventSource('/api/events');
  source.addEventListener('runs', (e) => onChange(JSON.parse((e as MessageEvent<string>).data) as string[]));
  return () => source.close();
}
