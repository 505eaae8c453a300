/**
 * Benchmark dispatcher: `npm run bench -- <name> [args]` runs bench/<name>.ts's `main(args)`.
 * Each bench prints a table and writes bench/out/<name>.json with a `headline` object; the bench's
 * provenance (commit, uncommitted edits under src/ and bench/, Node, date, arguments) is taken here,
 * before it runs, and written into that JSON by bench/util.ts. Progress (the bench's start and end, a
 * heartbeat, its phases and child runs) goes to stderr; `--quiet` anywhere in the arguments silences it.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';
import { beginBench, benchHeartbeat, benchStarted } from './util.js';

const here = dirname(fileURLToPath(import.meta.url));
const [name, ...given] = process.argv.slice(2);
const args = given.filter((a) => a !== '--quiet');
if (!name || !/^[a-z0-9-]+$/.test(name) || !existsSync(join(here, `${name}.ts`))) {
  console.error(`usage: npm run bench -- <name>   (a file bench/<name>.ts; got ${JSON.stringify(name ?? '')})`);
  process.exit(2);
}
const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { main: (args: string[]) => Promise<void> };
beginBench(name, args, { quiet: args.length < given.length });
const ended = benchStarted();
const stop = benchHeartbeat();
await mod.main(args).finally(stop);
ended();
