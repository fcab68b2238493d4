#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pass_shape.h"
#include "kernels/cuda/sm_count.h"
#include "kernels/cuda/synthetic.h"
#include "kernels/synthetic_math.h"

#include <type_traits>

namespace dp::kernels::cuda {
namespace {

__global__ void labels_kernel(int32_t* y, uint32_t* words, const int64_t* indices, int64_t rows, uint64_t seed,
                              int64_t classes) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const SyntheticLabel l =
        synthetic_label(seed, synthetic_stream(static_cast<uint64_t>(indices[r])), static_cast<uint64_t>(classes));
    y[r] = l.label;
    words[r] = l.words;
  }
}

// The cast of the f32 value to the compute dtype (round to nearest even, as cast.cu and augment.cu).
template <AugmentOut O>
__device__ __forceinline__ void store(void* out, int64_t i, float v) {
  if constexpr (O == AugmentOut::F32)
    static_cast<float*>(out)[i] = v;
  else if constexpr (O == AugmentOut::BF16)
    static_cast<uint16_t*>(out)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else
    static_cast<uint16_t*>(out)[i] = __half_as_ushort(__float2half_rn(v));
}

// Element i (storage order) is pixel (b, c, y, x): sample value j = (c H + y) W + x, from word j
// of its label's pattern stream and word words[b] + j of its own stream (two Philox blocks).
template <AugmentOut O, bool kNhwc>
__global__ void batch_kernel(void* out, AugmentDims d, const int64_t* indices, const int32_t* labels,
                             const uint32_t* words, uint64_t seed, const float* mean, const float* std, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const AugmentPixel p = augment_pixel_of(i, d, kNhwc);
    const uint64_t j = static_cast<uint64_t>((p.c * d.height + p.y) * d.width + p.x);
    const uint64_t pattern_stream = synthetic_stream(kSyntheticPatternId + static_cast<uint64_t>(labels[p.b]));
    const float pattern = synthetic_uniform(synthetic_word(seed, pattern_stream, j));
    const uint64_t own = synthetic_stream(static_cast<uint64_t>(indices[p.b]));
    const float noise = synthetic_uniform(synthetic_word(seed, own, words[p.b] + j));
    float v = synthetic_pixel(pattern, noise);
    if (mean != nullptr) v = fp::div(fp::sub(v, mean[p.c]), std[p.c]);
    store<O>(out, i, v);
  }
}

template <AugmentOut O>
void launch_batch(void* out, bool nhwc, const AugmentDims& d, const int64_t* indices, const int32_t* labels,
                  const uint32_t* words, uint64_t seed, const float* mean, const float* std, int64_t n,
                  cudaStream_t stream) {
  const unsigned grid = pass_blocks(n, sm_count(), kThreads);
  if (nhwc)
    DP_LAUNCH(batch_kernel<O, true>, grid, kThreads, 0, stream)(out, d, indices, labels, words, seed, mean, std, n);
  else
    DP_LAUNCH(batch_kernel<O, false>, grid, kThreads, 0, stream)(out, d, indices, labels, words, seed, mean, std, n);
}

// Element i of the windows (rows, T + 1) is token j = i % (T + 1) of row r = i / (T + 1): the
// input x[r][j] for j < T and the target y[r][j - 1] for j > 0.
__global__ void token_windows_kernel(int32_t* x, int32_t* y, const int64_t* indices, int64_t T, uint64_t seed,
                                     uint64_t vocab, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (T + 1), j = i - r * (T + 1);
    const auto token = static_cast<int32_t>(
        synthetic_token(seed, synthetic_stream(static_cast<uint64_t>(indices[r])), static_cast<uint64_t>(j), vocab));
    if (j < T) x[r * T + j] = token;
    if (j > 0) y[r * T + j - 1] = token;
  }
}

}  // namespace

cudaError_t synthetic_token_windows(int32_t* x, int32_t* y, const int64_t* indices, int64_t rows, int64_t T,
                                    uint64_t seed, int64_t vocab, cudaStream_t stream) {
  if (rows < 0 || T < 1 || vocab < 1 || vocab > 65536) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr || indices == nullptr) return cudaErrorInvalidValue;
  const int64_t n = rows * (T + 1);
  DP_LAUNCH(token_windows_kernel, pass_blocks(n, sm_count(), kThreads), kThreads, 0, stream)(
      x, y, indices, T, seed, static_cast<uint64_t>(vocab), n);
  DP_RETURN_LAUNCH();
}

cudaError_t synthetic_labels(int32_t* y, uint32_t* words, const int64_t* indices, int64_t rows, uint64_t seed,
                             int64_t classes, cudaStream_t stream) {
  if (rows < 0 || classes < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (y == nullptr || words == nullptr || indices == nullptr) return cudaErrorInvalidValue;
  DP_LAUNCH(labels_kernel, grid_1d(rows), kThreads, 0, stream)(y, words, indices, rows, seed, classes);
  DP_RETURN_LAUNCH();
}

cudaError_t synthetic_batch(void* out, AugmentOut out_type, bool channels_last, AugmentDims d, const int64_t* indices,
                            const int32_t* labels, const uint32_t* words, uint64_t seed, const float* mean,
                            const float* std, cudaStream_t stream) {
  if (d.batch < 0 || d.channels < 1 || d.height < 1 || d.width < 1) return cudaErrorInvalidValue;
  if (out_type != AugmentOut::F32 && out_type != AugmentOut::BF16 && out_type != AugmentOut::F16)
    return cudaErrorInvalidValue;
  if ((mean == nullptr) != (std == nullptr)) return cudaErrorInvalidValue;
  if (d.batch == 0) return cudaSuccess;
  if (out == nullptr || indices == nullptr || labels == nullptr || words == nullptr) return cudaErrorInvalidValue;
  const int64_t n = d.batch * d.channels * d.height * d.width;
  const auto run = [&](auto o) {
    launch_batch<decltype(o)::value>(out, channels_last, d, indices, labels, words, seed, mean, std, n, stream);
  };
  switch (out_type) {
    case AugmentOut::F32: run(std::integral_constant<AugmentOut, AugmentOut::F32>{}); break;
    case AugmentOut::BF16: run(std::integral_constant<AugmentOut, AugmentOut::BF16>{}); break;
    case AugmentOut::F16: run(std::integral_constant<AugmentOut, AugmentOut::F16>{}); break;
  }
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
