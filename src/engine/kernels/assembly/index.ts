// Entry point of the WASM kernel module: re-exports every kernel.
export { gemm, gemmSmallBT } from './matmul';
export { attentionForward, attentionBackward, attentionScratchBytes, decodeAttention } from './attention';
export { swigluForward, swigluBackward } from './swiglu';
export { rmsnormForward, rmsnormBackward, rmsnormBackwardGroups, addRows } from './norm';
export { softmaxForward, softmaxBackward } from './norm';
export { rope } from './rope';
export { logitGrad, adamw } from './optim';
