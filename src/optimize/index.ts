export * from './types.js';
export * from './advantages/index.js';
export * from './datums.js';
export * from './losses.js';
export * from './off-policy.js';
export * from './schedule.js';
