/**
 * Issue 17, fuzzing: property-based bodies (fast-check) for every HTTP body `arbor serve` accepts; no
 * crash, no hang, no 5xx for client input. The harness is testkit/reliability/serve-fuzz.ts (also used by
 * benches). A sabotaged server (request checks switched off, as before the fix) must be caught.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runServeFuzz } from '../../testkit/reliability/serve-fuzz.js';

test(
  'serve fuzz: >= 10,000 cases over every body, one after another and 8 at a time: no 5xx, no crash, no hang',
  { timeout: 120_000 },
  async () => {
    const sequential = await runServeFuzz(12_000, { seed: 17 });
    const concurrent = await runServeFuzz(3_000, { seed: 99, concurrency: 8 });
    for (const r of [sequential, concurrent]) {
      console.log(
        `# serve fuzz: ${r.cases} cases in ${r.wallMs} ms, failures ${r.failures}, 5xx ${r.serve5xx}, statuses ${JSON.stringify(r.statuses)}`,
      );
      assert.deepEqual(r.examples, []);
      assert.equal(r.failures, 0);
      assert.equal(r.serve5xx, 0);
    }
    assert.ok(sequential.cases + concurrent.cases >= 15_000, `${sequential.cases + concurrent.cases} cases`);
    const bodies = [
      'completions',
      'generate',
      'abort',
      'update_weights',
      'create_session',
      'heartbeat',
      'create_sampling_session',
      'asample',
      'create_model',
      'forward_backward',
      'forward',
      'optim_step',
      'save_for_sampler',
      'save_weights',
      'load_weights',
      'retrieve_future',
      'raw',
    ];
    for (const b of bodies) assert.ok((sequential.byBody[b] ?? 0) >= 600, `${b}: ${sequential.byBody[b]} cases`);
    // the bodies reach past validation: successful sampling, training and weight loads happen
    assert.ok(
      sequential.statuses['200'] > 2000 && sequential.statuses['400'] > 2000 && sequential.statuses['413'] > 0,
      JSON.stringify(sequential.statuses),
    );
    assert.ok(
      concurrent.statuses['429'] > 0,
      `8 at a time over --max-concurrent 4: ${JSON.stringify(concurrent.statuses)}`,
    );
  },
);

test('serve fuzz catches a server that lets bad requests reach the engine (the pre-fix behaviour)', async () => {
  const r = await runServeFuzz(2_000, {
    seed: 5,
    sabotage: (server) => {
      server.guard.check = (request) => request.maxTokens;
    },
  });
  assert.ok(r.serve5xx > 0 && r.failures >= r.serve5xx, JSON.stringify({ failures: r.failures, serve5xx: r.serve5xx }));
  // the SGLang and Tinker routes answer {"error": message}, the vLLM routes vLLM's {"error": {"message": ...}}
  assert.ok(
    r.examples.some((e) => /→ 500 \{"error":(\{"message":)?"nano sampler: request 0: /.test(e)),
    r.examples.join('\n'),
  );
});
