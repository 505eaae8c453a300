/**
 * Issue 26, end to end: `arbor train` on an agent config whose MCP server (the pinned server-everything,
 * wrapped to exit on its own 0.3 s after each tool listing) keeps dying. Each exit is logged on Arbor's stderr
 * and in <run dir>/logs/mcp.stderr.log and the server is restarted, until the restart bound is spent:
 * then the run fails with exit code 1 and an error naming the server command, and no server is left.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { newMarker, reapLeft } from '../../testkit/env/third-party.js';

const exiting = fileURLToPath(new URL('../../testkit/env/exiting-everything-server.mjs', import.meta.url));

test(
  'train: a server that keeps exiting is restarted and logged, then the run fails naming it',
  { timeout: 300_000 },
  () => {
    const marker = newMarker();
    const dir = mkdtempSync(join(tmpdir(), 'arbor-crash-run-'));
    const outDir = join(dir, 'run');
    const config = {
      run: {
        name: 'crash',
        outDir,
        seed: 1,
        steps: 20_000,
        promptsPerStep: 2,
        evalEvery: 0,
        evalCount: 2,
        evalPassK: 0,
        trainItems: 20,
      },
      task: { name: 'calculator' },
      env: {
        kind: 'mcp',
        command: process.execPath,
        args: [exiting, marker],
        env: { ARBOR_EXIT_AFTER_MS: '300' },
        tools: ['echo'],
        restart: { maxRestarts: 2, windowSeconds: 120 },
      },
      model: { dModel: 16, nLayers: 1, nHeads: 1, dFF: 32, contextLength: 128 },
      sft: { enabled: false },
      sampling: { maxResponseTokens: 12 },
      generate: { kind: 'agent', groupSize: 2, maxTurns: 2 },
    };
    const file = join(dir, 'config.yaml');
    writeFileSync(file, YAML.stringify(config));
    const r = spawnSync(process.execPath, ['bin/arbor.mjs', 'train', file], { encoding: 'utf8', timeout: 240_000 });
    const output = `exit ${r.status}\n${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 1, output);
    const command = `${process.execPath} ${exiting} ${marker}`;
    const bound =
      'past the restart bound \\(env\\.restart\\.maxRestarts=2 within windowSeconds=120\\); the run cannot go on';
    const escaped = command.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    assert.match(
      r.stderr,
      new RegExp(`\narbor: MCP server \`${escaped}\` \\(pid \\d+\\) exited \\(exit code 7\\): exit 3, ${bound}\n`),
    );
    const restarts =
      r.stderr.match(
        /arbor: the MCP server .* exited \(exit code 7\), the shared process; restarting it \(restart \d of at most 2/g,
      ) ?? [];
    assert.ok(restarts.length >= 2, output);
    const log = readFileSync(join(outDir, 'logs', 'mcp.stderr.log'), 'utf8');
    assert.match(
      log,
      /# \S+ arbor: the MCP server .* exited \(exit code 7\), the shared process; restarting it \(restart 1 of/,
    );
    assert.match(log, new RegExp(` pid \\d+ started: ${escaped}\n`));
    assert.deepEqual(reapLeft(marker), [], 'no server process is left');
  },
);
