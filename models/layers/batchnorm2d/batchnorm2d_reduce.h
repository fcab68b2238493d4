// defines: the own batch-norm path's per-channel reductions (train.bn_impl = "own"), for NHWC
// (the main case: channels-last 16-bit data) and NCHW activations of f32, bf16 or f16:
//   batchnorm_welford_stats    one pass over x: each thread keeps a Welford (count, mean, M2) per
//                              channel in f32, blocks merge their threads', a second kernel merges
//                              the blocks' partials per channel; then the statistics the
//                              elementwise kernels read (batchnorm2d_apply.h), and the running
//                              statistics updated as torch does;
//   batchnorm_backward_reduce  one pass over dy (masked by y > 0 under a fused ReLU) and x: sum g
//                              and sum g * (x - mean) per channel; then the parameter gradients
//                              (accumulated) and the input gradient's per-channel coefficients.
//
// Loads are 16 bytes wide (8 16-bit or 4 f32 values) where the layout allows it: NHWC with C a
// multiple of that width (a thread owns 8 or 4 neighbouring channels and walks rows), NCHW with
// H*W a multiple of it (a thread reads 8 or 4 neighbours in one plane); one value at a time
// otherwise, and wherever a pointer is not 16-byte aligned. Threads accumulate in f32; blocks
// combine their threads in a fixed shared-memory tree (Chan et al.'s pairwise update for the
// Welford triples); each block writes its partial per channel to scratch, and a second kernel
// combines a channel's partials in f64 in a fixed order (warp lanes take chunks p, p+32, ...,
// then a fixed shuffle tree). No atomics: the partition depends only on the shape, dtype and
// alignment (batchnorm_reduce_plan), so the same input gives the same bits.
//
// Per-channel arrays are f32 on the device: mean, invstd (1/sqrt(var + eps), saved by the forward
// for the backward), scale (w * invstd). Weight, bias and gradients are f32 (BatchNorm2d keeps f32
// parameters). The count behind the statistics is N*H*W (one process: SyncBN keeps the f64
// kernels of batchnorm2d_kernels.h, whose sums it all-reduces). Every wrapper validates its
// arguments (cudaErrorInvalidValue before any launch), launches on `stream` and returns
// cudaGetLastError(); check it with CHECK_CUDA.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"

namespace dp::kernels::cuda {

// How a reduction covers an (N, C, HW) batch. Pure; tested on the host.
//   NHWC: block (block_x, block_y): block_x threads across channel groups of `vec` channels,
//         block_y along rows (the N*HW positions); grid (tiles, chunks): tiles of block_x groups
//         times chunks of chunk_len rows.
//   NCHW: block (block_x, 1) along a channel's values; grid (C, chunks): chunk_len vectors of
//         `vec` values (M / vec in all: N*HW values, in plane order) per chunk.
// Chunks are never empty; at most kBnMaxReduceBlocks blocks in all unless the tiles alone are more.
struct BnReducePlan {
  int vec = 1;
  int block_x = 0, block_y = 0;
  int64_t tiles = 0, chunks = 0, chunk_len = 0;
};
inline constexpr int64_t kBnMaxReduceBlocks = 1024;
// vectorisable: every pointer the kernels read is 16-byte aligned (the wrappers check).
BnReducePlan batchnorm_reduce_plan(const BnDims& d, DType dtype, bool vectorisable);
// Scratch bytes of either reduction (two f32 partials per chunk and channel), for any alignment.
size_t batchnorm_reduce_scratch_bytes(const BnDims& d, DType dtype);

// Training statistics of x (N, C, HW), count M = N*HW > 1:
//   mean (C), invstd (C) = 1/sqrt(var + eps) with var the biased variance (what the batch is
//   normalised with), scale (C) = w * invstd;
//   update_running: running_mean = (1 - momentum) running_mean + momentum mean, running_var the
//   same with var * M / (M - 1) (torch's unbiased running variance), in f64 as the CPU twin.
[[nodiscard]] cudaError_t batchnorm_welford_stats(float* mean, float* invstd, float* scale, float* running_mean,
                                                  float* running_var, const void* x, DType dtype, const float* w,
                                                  const BnDims& d, double momentum, double eps, bool update_running,
                                                  void* scratch, size_t scratch_bytes, cudaStream_t stream);

// Backward sums of g = dy (relu_y null) or g = dy * (relu_y > 0) (a fused ReLU: relu_y is the
// layer's output) and x (N, C, HW), with the forward's mean and invstd:
//   dw (C) += sum g * xhat, db (C) += sum g   (xhat = (x - mean) * invstd; f32 accumulation)
//   the input gradient dx = (k g + c1) - (x - mean) c2 (batchnorm_backward_apply) with
//   k = w * invstd and, batch_stats (training: the statistics depend on x),
//   c1 = -k * sum g / M, c2 = k * invstd * sum(g xhat) / M; c1 = c2 = 0 otherwise (eval).
[[nodiscard]] cudaError_t batchnorm_backward_reduce(float* dw, float* db, float* k, float* c1, float* c2,
                                                    const void* dy, const void* relu_y, const void* x, DType dtype,
                                                    const float* mean, const float* invstd, const float* w,
                                                    bool batch_stats, const BnDims& d, void* scratch,
                                                    size_t scratch_bytes, cudaStream_t stream);

}  // namespace dp::kernels::cuda
