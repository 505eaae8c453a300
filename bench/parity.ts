/**
 * `npm run bench -- parity`: the embedded engine against PyTorch, number for number (the same
 * comparisons as test/nano/pytorch-parity.test.ts, from testkit/reference/parity.ts). Writes
 * bench/out/parity.json with headline `pytorch_parity`: 1 when every comparison passes, 0 when one
 * fails, null when PyTorch is not importable (then `reason` says why). Each comparison row gives the
 * largest |Arbor − PyTorch| and the worst entry as a fraction of its tolerance.
 */
import { runParity, TOLERANCES } from '../testkit/reference/parity.js';
import { printTable, writeBenchJson } from './util.js';

export async function main(): Promise<void> {
  const report = await runParity();
  if (!report.available) {
    console.log(`PyTorch parity not measured: ${report.reason}`);
    writeBenchJson('parity', { pytorch_parity: null }, { reason: report.reason, comparisons: [] });
    return;
  }
  const rows = report.comparisons.map((c) => ({
    comparison: c.name,
    pass: c.pass ? 'yes' : 'NO',
    max_abs_diff: c.maxAbs,
    worst_of_tolerance: c.worstRatio,
  }));
  printTable(rows);
  const pass = report.comparisons.every((c) => c.pass);
  console.log(
    `${report.comparisons.filter((c) => c.pass).length}/${report.comparisons.length} comparisons pass (PyTorch ${report.torch} via ${report.python}, ${report.seconds.toFixed(1)} s)`,
  );
  writeBenchJson(
    'parity',
    { pytorch_parity: pass ? 1 : 0 },
    {
      torch: report.torch,
      python: report.python,
      seconds: report.seconds,
      tolerances: TOLERANCES,
      comparisons: report.comparisons,
    },
  );
}
