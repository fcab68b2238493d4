// defines: softmax_xent, the fused softmax + cross-entropy loss (mean over the batch) and its
// gradient, with label smoothing exactly as PyTorch's F.cross_entropy(label_smoothing=eps):
//   q = (1 - eps) onehot(label) + eps / K,   loss_n = -sum_k q_k log softmax(z_n)_k.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// logits (N, K), labels (N) in [0, K) (checked by the caller). Returns the mean loss (double).
// dlogits (N, K) = (softmax(z) - q) / N, or skipped when null. Rows are independent (OpenMP);
// the batch mean sums the per-row losses in row order, so the result is deterministic.
// ld: the row stride of logits and dlogits (0: K). With ld > K each row's columns [K, ld) are
// padding (a padded LM head's, models/layers/linear/linear.h pad_out_to): never read, outside the
// softmax, and their gradient is written 0.
template <typename T>
double softmax_xent(const T* logits, const int32_t* labels, T* dlogits, int64_t N, int64_t K, double smoothing,
                    int64_t ld = 0);

}  // namespace dp::kernels::cpu
