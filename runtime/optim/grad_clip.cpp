#include "runtime/optim/grad_clip.h"

#include <cmath>

#include "kernels/cpu/grad_norm.h"

namespace dp::optim {

GradClipper::GradClipper(double max_norm) : max_norm_(max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    DP_THROW_USER("train.grad_clip = {}: the largest gradient norm must be a finite value > 0 (0 turns clipping off)",
                  max_norm);
}

GradClipper::~GradClipper() = default;

double GradClipper::clip(const Tensor& grads, void* cuda_stream) {
  DP_CHECK(grads.defined() && grads.dtype() == DType::F32 && grads.ndim() == 1,
           "gradient clipping of {}: want the flat f32 gradient arena", grads.defined() ? grads.describe() : "nothing");
  if (grads.device().is_cuda()) return clip_device(grads, cuda_stream);
  return clip_pieces(grads, {{0, grads.numel(), 0}}, [](double sum_sq) { return sum_sq; });  // one piece, one rank
}

double GradClipper::clip_pieces(const Tensor& grads, const std::vector<ArenaPiece>& pieces, const Reduce& reduce,
                                void* cuda_stream) {
  DP_CHECK(grads.defined() && grads.dtype() == DType::F32 && grads.ndim() == 1,
           "gradient clipping of {}: want the flat f32 gradient arena", grads.defined() ? grads.describe() : "nothing");
  for (const ArenaPiece& pc : pieces)
    DP_CHECK(pc.len >= 0 && pc.arena_begin >= 0 && pc.arena_begin + pc.len <= grads.numel(),
             "gradient clipping: piece (arena {}, {} elements) is outside the arena of {}", pc.arena_begin, pc.len,
             grads.numel());
  if (grads.device().is_cuda()) return clip_pieces_device(grads, pieces, reduce, cuda_stream);
  float* g = grads.data<float>();
  double local = 0;
  for (const ArenaPiece& pc : pieces) local += kernels::cpu::sum_of_squares(g + pc.arena_begin, pc.len);
  const double sum_sq = reduce(local);
  for (const ArenaPiece& pc : pieces) kernels::cpu::clip_by_norm(g + pc.arena_begin, pc.len, sum_sq, max_norm_);
  return std::sqrt(sum_sq);
}

}  // namespace dp::optim
