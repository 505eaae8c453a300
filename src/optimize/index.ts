export * from './types.js';
export * from './advantages/index.js';
export * from './datums.js';
export * from './losses.js';
