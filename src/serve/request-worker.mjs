// Worker-thread entry of serve/request-worker.ts: registers the TypeScript loader (tsx), as
// bin/arbor.mjs does for the CLI, then runs request-worker-main.ts.
import { register } from 'tsx/esm/api';

register();
await import('./request-worker-main.ts');
