/**
 * `npm run bench -- orchestrator`: throughput and CPU cost of the remote sampler client. A separate
 * process serves /v1/completions with an instant, fixed vLLM-style reply (a benchmark harness, not a
 * product mock); the client (OpenAICompletionsSampler over JsonClient) keeps `in_flight` segment
 * requests outstanding and completes `total` of them. Reports requests/s and client CPU ms per
 * request (process.cpuUsage of this process only). Headline: requests_per_s, in_flight.
 */
import { spawn } from 'node:child_process';
import { OpenAICompletionsSampler } from '../src/engine/remote/openai-completions.js';
import { printTable, writeBenchJson } from './util.js';

const SERVER = `
const http = require('node:http');
const body = JSON.stringify({ id: 'x', object: 'text_completion', model: 'm', choices: [{ index: 0, text: '', token_ids: [5, 6, 7, 8, 9, 10, 11, 12], finish_reason: 'length',
  logprobs: { tokens: ['token_id:5','token_id:6','token_id:7','token_id:8','token_id:9','token_id:10','token_id:11','token_id:12'], token_logprobs: [-1,-1,-1,-1,-1,-1,-1,-1], top_logprobs: null } }],
  usage: { prompt_tokens: 64, completion_tokens: 8, total_tokens: 72, prompt_tokens_details: { cached_tokens: 56 } } });
const server = http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }); res.end(body); }); });
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

export async function main(args: string[]): Promise<void> {
  const inFlight = arg(args, 'in-flight', 1000);
  const total = arg(args, 'total', 30000);
  const child = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) =>
    child.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
  );
  try {
    const sampler = new OpenAICompletionsSampler({
      servers: [`http://127.0.0.1:${port}`],
      model: 'm',
      concurrencyPerServer: inFlight,
    });
    const request = { tokens: Array.from({ length: 64 }, (_, i) => i), maxTokens: 8, seed: 1 };
    // warm-up (connections, JIT)
    await Promise.all(Array.from({ length: Math.min(inFlight, 2000) }, () => sampler.sample([request])));
    let issued = 0;
    let done = 0;
    let maxOutstanding = 0;
    let outstanding = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const launch = () => {
        while (outstanding < inFlight && issued < total) {
          issued++;
          outstanding++;
          maxOutstanding = Math.max(maxOutstanding, outstanding);
          sampler.sample([request]).then((r) => {
            if (r[0].completions[0].tokens.length !== 8) reject(new Error('bad reply'));
            outstanding--;
            done++;
            if (done === total) resolve();
            else launch();
          }, reject);
        }
      };
      launch();
    });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const rps = total / seconds;
    printTable([
      {
        requests: total,
        in_flight: maxOutstanding,
        seconds,
        requests_per_s: rps,
        client_cpu_ms_per_request: cpuMs / total,
        client_cpu_utilisation: cpuMs / 1000 / seconds,
      },
    ]);
    writeBenchJson(
      'orchestrator',
      { requests_per_s: rps, in_flight: maxOutstanding },
      {
        total,
        seconds,
        client_cpu_ms: cpuMs,
        client_cpu_ms_per_request: cpuMs / total,
        note: 'server in a separate process; client CPU only',
      },
    );
  } finally {
    child.kill();
  }
}
