/**
 * A child entry for fault tests: `node --import tsx testkit/reliability/kill-on-write.ts <arbor args...>`
 * runs the `arbor` command, and with ARBOR_KILL_ON=<path suffix> and ARBOR_KILL_AT=<n> it SIGKILLs
 * itself at the n-th atomic write of a matching file, after the temporary file is durable and before
 * the rename: the moment inside a checkpoint or cache write where a crash hurts most. With
 * ARBOR_FAULT=enospc that write fails with ENOSPC instead (a full disk).
 */
import { setWriteFaultHook } from '../../src/core/files.js';
import { main } from '../../src/cli/main.js';

const suffix = process.env.ARBOR_KILL_ON;
const at = Number(process.env.ARBOR_KILL_AT ?? 1);
if (suffix) {
  let seen = 0;
  setWriteFaultHook((file) => {
    if (!file.endsWith(suffix) || ++seen !== at) return;
    if (process.env.ARBOR_FAULT === 'enospc')
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    process.kill(process.pid, 'SIGKILL');
  });
}
process.exitCode = await main(process.argv.slice(2));
