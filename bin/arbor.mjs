#!/usr/bin/env node
// The `arbor` command: registers the TypeScript loader (tsx) and runs src/cli/main.ts.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
