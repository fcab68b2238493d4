// defines: the CPU reference of 2-D batch normalisation (PyTorch's nn.BatchNorm2d) as three
// kernels: per-channel batch statistics, the affine normalisation, and its backward; and the
// per-channel sums they are made of, which SyncBN all-reduces between them.
//
// Statistics, mean and 1/std are double whatever the element type: the reductions run over
// N*H*W values and f32 accumulation would lose digits the f64 oracle would notice. Each
// channel belongs to one OpenMP thread and is summed in a fixed order (planes in n order, each
// with `omp simd` partial sums whose layout is fixed at compile time): deterministic, and the
// same for any thread count.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// mean (C), var (C) = per-channel mean and biased variance (divide by N*HW) of x (N, C, HW);
// two passes (mean, then squared deviations) for accuracy.
template <typename T>
void batchnorm2d_stats(double* mean, double* var, const T* x, int64_t N, int64_t C, int64_t HW);

// Building blocks of the statistics: sum[c] = sum of x; sqdev[c] = sum of (x - mean[c])^2.
template <typename T>
void batchnorm2d_channel_sum(double* sum, const T* x, int64_t N, int64_t C, int64_t HW);
template <typename T>
void batchnorm2d_channel_sqdev(double* sqdev, const T* x, const double* mean, int64_t N, int64_t C, int64_t HW);

// y (N, C, HW) = (x - mean[c]) * invstd[c] * w[c] + b[c].
template <typename T>
void batchnorm2d_forward(T* y, const T* x, const T* w, const T* b, const double* mean, const double* invstd,
                         int64_t N, int64_t C, int64_t HW);

// dw (C) += sum dy * xhat; db (C) += sum dy; dx (N, C, HW) overwritten (null: skip).
// batch_stats: mean/invstd are this batch's (training), so dx includes the path through them:
//   dx = w * invstd / M * (M dy - sum(dy) - xhat * sum(dy xhat)),  M = N*HW;
// otherwise (running statistics, eval) they are constants: dx = dy * w * invstd.
template <typename T>
void batchnorm2d_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const double* mean,
                          const double* invstd, bool batch_stats, int64_t N, int64_t C, int64_t HW);

// Building blocks of the backward: sum_dy[c] = sum dy, sum_dy_xhat[c] = sum dy * xhat.
template <typename T>
void batchnorm2d_grad_sums(double* sum_dy, double* sum_dy_xhat, const T* dy, const T* x, const double* mean,
                           const double* invstd, int64_t N, int64_t C, int64_t HW);
// dx = w * invstd * (dy - mean_dy[c] - xhat * mean_dy_xhat[c]), where the means are over every
// value the statistics came from (all ranks' for SyncBN).
template <typename T>
void batchnorm2d_grad_input(T* dx, const T* dy, const T* x, const T* w, const double* mean, const double* invstd,
                            const double* mean_dy, const double* mean_dy_xhat, int64_t N, int64_t C, int64_t HW);

}  // namespace dp::kernels::cpu
