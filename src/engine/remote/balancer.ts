/**
 * Client-side load balancing over several servers of one engine. Requests carrying the same affinity
 * key (e.g. a tree id) always go to the same server, so that tree's prefix stays in that server's
 * cache (rendezvous hashing: adding a server moves only the keys it wins). Requests without a key go
 * to the server with the fewest requests in flight.
 */
import { hashString } from '../../core/rng.js';
import { JsonClient, type JsonClientOptions } from './http.js';

export class ServerPool {
  readonly clients: JsonClient[];

  constructor(servers: Array<string | JsonClientOptions>, concurrencyPerServer: number) {
    if (!servers.length) throw new Error('ServerPool: at least one server URL is required');
    this.clients = servers.map(
      (s) =>
        new JsonClient(
          typeof s === 'string'
            ? { baseUrl: s, concurrency: concurrencyPerServer }
            : { concurrency: concurrencyPerServer, ...s },
        ),
    );
  }

  pick(affinityKey?: string): JsonClient {
    if (this.clients.length === 1) return this.clients[0];
    if (affinityKey !== undefined) {
      let best = 0;
      let bestScore = -1;
      for (let i = 0; i < this.clients.length; i++) {
        const score = hashString(`${affinityKey}|${this.clients[i].baseUrl}`);
        if (score > bestScore) {
          bestScore = score;
          best = i;
        }
      }
      return this.clients[best];
    }
    return this.clients.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
  }
}
