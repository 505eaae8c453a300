// Entry point of the WASM kernel module: re-exports every kernel.
export { gemm, gemmSmallBT } from './matmul';
export { attentionForward, attentionBackward, decodeAttention } from './attention';
export { rmsnormForward, rmsnormBackward, softmaxForward, softmaxBackward } from './norm';
