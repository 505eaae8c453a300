/**
 * Client-side load balancing over several servers of one engine: requests carrying the same affinity
 * key (e.g. a tree id) always go to the same server, so that tree's prefix stays in that server's
 * cache (rendezvous hashing: adding or removing a server moves only the keys it wins). The sampler
 * fleet (fleet.ts) applies it to the servers that are up; requests without a key go to the server with
 * the fewest in flight.
 */
import { hashString } from '../../core/rng.js';

/** The item of `items` with the highest hash of (key, its name): a key's choice moves only when its winner leaves. */
export function rendezvous<T>(items: T[], key: string, name: (item: T) => string): T {
  let best = items[0];
  let bestScore = -1;
  for (const item of items) {
    const score = hashString(`${key}|${name(item)}`);
    if (score > bestScore) {
      bestScore = score;
      best = item;
    }
  }
  return best;
}
