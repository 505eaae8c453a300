#!/usr/bin/env node
// Placeholder until the WASM kernels land: nothing to build yet.
console.log('build-wasm: no kernels to build yet');
