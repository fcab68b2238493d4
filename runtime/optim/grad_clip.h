// defines: GradClipper, train.grad_clip: torch.nn.utils.clip_grad_norm_ over the flat gradient
// arena. The global L2 norm is summed in one fixed order (kernels/grad_norm_math.h: the same bits
// on the CPU and the GPU, for any thread count) after the all-reduce, so every rank computes the
// same norm from the same averaged gradients and clips identically: replicas stay identical.
// Under fp16 the gradients are unscaled first (launch/gpu_run.h), so the norm is the true one.
#pragma once
#include <functional>
#include <vector>

#include "base/pimpl_ptr.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor.h"

namespace dp::optim {

class GradClipper {
 public:
  // max_norm > 0 (UserError otherwise).
  explicit GradClipper(double max_norm);
  ~GradClipper();
  GradClipper(GradClipper&&) noexcept = default;
  GradClipper(const GradClipper&) = delete;
  GradClipper& operator=(const GradClipper&) = delete;

  // grads: the flat f32 gradient arena (CPU, or a GPU with cuda_stream its cudaStream_t). Returns
  // the norm before clipping; when it exceeds max_norm the gradients are multiplied by
  // max_norm / (norm + 1e-6). On a GPU the sum stays on the device (the clip kernel reads it) and
  // the host waits only for the norm's two small kernels, not for the clip.
  double clip(const Tensor& grads, void* cuda_stream = nullptr);
  // ZeRO (collectives/reducer/zero_shard.h): clipping over the pieces of the flat arena a rank
  // owns (their arena_begin and len). Each piece's squared sum as clip() sums an arena, added in
  // double in piece order; `reduce` turns that into the global sum (ZeRO: the all-reduce over
  // ranks, the same double everywhere); every piece is clipped by it, and its square root is
  // returned. On a GPU the piece sums come to the host (one wait for their kernels) and the
  // global sum goes back to the device for the clip kernels, which stay queued.
  using Reduce = std::function<double(double)>;
  double clip_pieces(const Tensor& grads, const std::vector<ArenaPiece>& pieces, const Reduce& reduce,
                     void* cuda_stream = nullptr);
  double max_norm() const { return max_norm_; }

 private:
  double clip_device(const Tensor& grads, void* stream);  // grad_clip_cuda.cpp
  double clip_pieces_device(const Tensor& grads, const std::vector<ArenaPiece>& pieces, const Reduce& reduce,
                            void* stream);
  double max_norm_;
  struct DeviceScratch;  // grad_clip_cuda.cpp
  // scratch_, made (again) when it has room for fewer than n elements or slots piece sums.
  DeviceScratch& device_scratch(int64_t n, size_t slots, void* stream);
  PimplPtr<DeviceScratch> scratch_;
};

}  // namespace dp::optim
