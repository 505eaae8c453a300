// Worker-thread entry of the async rollout producer: registers the TypeScript loader (tsx), as
// bin/arbor.mjs does for the CLI, then runs rollout-worker.ts.
import { register } from 'tsx/esm/api';

register();
await import('./rollout-worker.ts');
