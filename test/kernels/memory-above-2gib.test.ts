/**
 * Kernel memory above 2 GiB (WasmKernelMemory's maximum is 4 GiB): GEMM and RMSNorm on arrays whose
 * byte offsets are past 2^31 (wrapping to negative i32 words on the way to WASM and to the helper
 * thread) match the reference, and asking for more than 4 GiB is a clear error. Runs in a child
 * process (testkit/kernels/above-2gib.ts) so the memory goes back to the system when it exits; skipped where
 * the machine has too little memory to reserve 4 GiB.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { freemem, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

const GiB = 2 ** 30;
const roomy = totalmem() >= 6 * GiB && freemem() >= 2 * GiB;
const [total, free] = [totalmem() / GiB, freemem() / GiB].map((x) => x.toFixed(1));
const why = `needs 6 GiB of RAM and 2 GiB free to reserve a 4 GiB memory (has ${total}, ${free} free)`;

const title = 'GEMM and RMSNorm on arrays past 2^31 bytes match the reference; more than 4 GiB is refused';
test(title, { skip: roomy ? false : why }, () => {
  const child = fileURLToPath(new URL('../../testkit/kernels/above-2gib.ts', import.meta.url));
  const run = spawnSync(process.execPath, ['--import', 'tsx', child], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, `child failed: ${run.stderr}`);
  const r = JSON.parse(run.stdout.trim().split('\n').pop()!);
  assert.ok(r.lowestOffset >= 2 ** 31 + 2 ** 30, `arrays start at ${r.lowestOffset} bytes`);
  assert.ok(r.helperJobs >= 4, `the helper thread ran shares of the GEMMs and norms (${r.helperJobs})`);
  assert.ok(r.gemm <= 1e-4 && r.gemmForeign <= 1e-4, `GEMM error ${r.gemm}, foreign ${r.gemmForeign}`);
  assert.ok(r.rmsnorm <= 1e-5, `rmsnorm error ${r.rmsnorm}`);
  assert.ok(r.rmsnormBackward <= 1e-4, `rmsnorm backward error ${r.rmsnormBackward}`);
  // the same comparisons reject a perturbed input
  assert.ok(r.gemmPerturbed > 1e-4, `perturbed GEMM: ${r.gemmPerturbed}`);
  assert.ok(r.rmsnormPerturbed > 1e-5, `perturbed rmsnorm: ${r.rmsnormPerturbed}`);
  assert.match(r.limit, /^ArborError: .*GiB of kernel memory needed; a wasm32 memory holds at most 4 GiB/);
});
