export * from './store.js';
export * from './data-order.js';
