#include "collectives/reducer/zero_shard.h"

#include <cmath>

#include "collectives/collective_tag.h"
#include "kernels/cpu/grad_norm.h"

namespace dp {

ZeroShard::ZeroShard(Communicator& comm, const std::vector<Bucket>& buckets, int64_t arena_numel)
    : comm_(comm), buckets_(buckets), arena_numel_(arena_numel),
      layout_(shard_layout(buckets, comm.size(), comm.rank())) {
  for (const ShardPiece& pc : layout_.pieces) pieces_.push_back({pc.arena_begin, pc.len, pc.shard_begin});
}

double ZeroShard::clip(const Tensor& grads, double max_norm) {
  DP_CHECK(grads.defined() && grads.dtype() == DType::F32 && grads.numel() == arena_numel_ && grads.device().is_cpu(),
           "ZeRO gradient clipping: want the flat f32 CPU gradient arena of {} elements", arena_numel_);
  float* g = grads.data<float>();
  double local = 0;
  for (const ShardPiece& pc : layout_.pieces) local += kernels::cpu::sum_of_squares(g + pc.arena_begin, pc.len);
  Tensor sum = Tensor::zeros({1}, DType::F64);
  sum.data<double>()[0] = local;
  comm_.allreduce(sum, ReduceOp::Sum);  // the same bits on every rank
  const double sum_sq = sum.data<double>()[0];
  for (const ShardPiece& pc : layout_.pieces) kernels::cpu::clip_by_norm(g + pc.arena_begin, pc.len, sum_sq, max_norm);
  return std::sqrt(sum_sq);
}

void ZeroShard::step(optim::Optimizer& opt, const Tensor& params, const Tensor& grads, double lr) {
  DP_CHECK(opt.numel() == layout_.numel, "ZeRO: the {} optimizer holds {} elements, the shard of rank {} has {}",
           opt.name(), opt.numel(), layout_.rank, layout_.numel);
  opt.step_pieces(params, grads, pieces_, lr);
}

void ZeroShard::gather_params(const Tensor& params) {
  DP_CHECK(params.defined() && params.numel() == arena_numel_, "ZeRO parameter gather: want the flat arena of {} "
           "elements", arena_numel_);
  std::vector<WorkPtr> works;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketScope tag(static_cast<int32_t>(b));
    works.push_back(
        comm_.allgather_blocks_async(params.slice_flat(buckets_[b].begin, {buckets_[b].end - buckets_[b].begin})));
  }
  for (auto& w : works) w->wait();
}

void ZeroShard::gather_state(const optim::Optimizer& shard, optim::Optimizer* whole) {
  const auto mine = shard.state();
  const auto dst = whole ? whole->state() : std::vector<std::pair<std::string, Tensor>>{};
  DP_CHECK(!whole || (dst.size() == mine.size() && whole->numel() == arena_numel_),
           "ZeRO checkpoint state: the {} optimizer over {} elements does not match the shard's", whole->name(),
           whole->numel());
  Tensor scratch = whole || mine.empty() ? Tensor() : Tensor::zeros({arena_numel_}, DType::F32);
  for (size_t k = 0; k < mine.size(); ++k) {
    DP_CHECK(!whole || dst[k].first == mine[k].first, "ZeRO checkpoint state: slot '{}' against '{}'", dst[k].first,
             mine[k].first);
    const Tensor f = whole ? dst[k].second.reshape({arena_numel_}) : scratch;
    const Tensor& src = mine[k].second;
    for (const ShardPiece& pc : layout_.pieces)
      if (pc.len > 0) f.slice_flat(pc.arena_begin, {pc.len}).copy_from(src.slice_flat(pc.shard_begin, {pc.len}));
    gather_params(f);  // the same in-place block all-gather, bucket by bucket
  }
  if (whole) whole->restore_steps(shard.steps());
}

void ZeroShard::take_pieces(const optim::Optimizer& full, optim::Optimizer& shard) const {
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const auto& [name, t] : full.state()) {
    Tensor s = Tensor::zeros({layout_.numel}, DType::F32);
    for (const ShardPiece& pc : layout_.pieces)
      if (pc.len > 0) s.slice_flat(pc.shard_begin, {pc.len}).copy_from(t.slice_flat(pc.arena_begin, {pc.len}));
    mine.emplace_back(name, s);
  }
  shard.load_state(mine, full.steps());
}

}  // namespace dp
