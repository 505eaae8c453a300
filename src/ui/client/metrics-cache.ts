/** Each run's metrics rows in the browser, grown incrementally from the byte offset the server returns. */
import type { MetricsRow } from '../types.js';
import { api } from './api.js';

const cache = new Map<string, { offset: number; rows: MetricsRow[] }>();

/** The run's rows, fetching only what was appended since the last call (all of them if the file shrank). */
export async function metricsOf(name: string): Promise<MetricsRow[]> {
  let entry = cache.get(name) ?? { offset: 0, rows: [] };
  for (;;) {
    const chunk = await api.metrics(name, entry.offset);
    if (chunk.offset < entry.offset)
      entry = { offset: 0, rows: [] }; // rewritten (resume truncated it)
    else if (chunk.offset === entry.offset) break;
    else entry = { offset: chunk.offset, rows: entry.rows.concat(chunk.rows) };
    if (!chunk.rows.length) break;
  }
  cache.set(name, entry);
  return entry.rows;
}
