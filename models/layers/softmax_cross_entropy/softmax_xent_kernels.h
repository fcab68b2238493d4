// defines: the CUDA twin of models/layers/softmax_cross_entropy/softmax_xent_ref.h: fused softmax + cross-entropy (mean
// over the batch) and its gradient, with label smoothing as PyTorch's
// F.cross_entropy(label_smoothing=eps): q = (1 - eps) onehot(label) + eps / K.
//
// Per row one warp, f32 accumulation (the CPU twin accumulates in double; the difference is
// within f32 rounding of the row's log-sum-exp, see tests/models/layers/softmax_cross_entropy/test_softmax_xent_kernels.cpp);
// the batch mean sums the row losses in double in a fixed order, so the result is deterministic.
// Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// logits (N, K), labels (N) (device). A label outside [0, K) — the caller's to check, as for
// the CPU twin — makes its row's loss and gradient NaN rather than reading out of bounds.
// dlogits (N, K) = (softmax(z) - q) / N, or skipped when null.
// row_loss (N): device scratch, left holding each row's loss.
// loss (1): device, the mean of row_loss (0 when N == 0); the host reads it when it needs it.
// ld: the row stride of logits and dlogits (0: K); with ld > K each row's columns [K, ld) are
// padding (a padded LM head's): never read, and their gradient is written 0.
// N >= 0, K >= 1, ld 0 or >= K, smoothing in [0, 1]; else cudaErrorInvalidValue.
[[nodiscard]] cudaError_t softmax_xent(const float* logits, const int32_t* labels, float* dlogits, float* row_loss,
                                       float* loss, int64_t N, int64_t K, double smoothing, cudaStream_t stream,
                                       int64_t ld = 0);

}  // namespace dp::kernels::cuda
