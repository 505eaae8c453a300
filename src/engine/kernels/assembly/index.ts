// Entry point of the WASM kernel module: re-exports every kernel.
export { gemm, gemmDecodeBT } from './matmul';
export { attentionForward, attentionBackward, attentionScratchBytes } from './attention';
export { decodeAttention, pagedAttention, pagedAttentionScratchBytes } from './attention';
export { swigluForward, swigluBackward } from './swiglu';
export { rmsnormForward, rmsnormBackward, rmsnormBackwardGroups, addRows } from './norm';
export { softmaxForward, softmaxBackward, samplingStats } from './norm';
export { rope } from './rope';
export { logitGrad, adamw } from './optim';
export { treeAttentionForward, treeAttentionBackward, treeAttentionScratchBytes } from './tree-attention';
