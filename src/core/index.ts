export * from './rng.js';
export * from './errors.js';
export * from './tree.js';
export * from './types.js';
