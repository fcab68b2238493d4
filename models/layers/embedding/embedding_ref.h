// defines: embedding_forward / embedding_backward, the CPU kernels of the embedding layer (a
// gather of table rows and its scatter-add): plain loops, the same for f32 and f64.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// y (M, D) = w[ids[m], :] for m < M; w (V, D). ids must be in [0, V) (checked by the layer).
template <typename T>
void embedding_forward(T* y, const int32_t* ids, const T* w, int64_t M, int64_t D);

// dw (V, D) += dy[m, :] at row ids[m], m in order: each thread owns a range of columns and
// walks every m, so the sums do not depend on the thread count.
template <typename T>
void embedding_backward(T* dw, const int32_t* ids, const T* dy, int64_t M, int64_t D);

}  // namespace dp::kernels::cpu
