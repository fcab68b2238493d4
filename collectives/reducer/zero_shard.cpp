#include "collectives/reducer/zero_shard.h"

#include <algorithm>
#include <cstring>

#include "base/pages.h"
#include "collectives/collective_tag.h"
#include "runtime/device_memory.h"
#include "runtime/memory_account.h"

namespace dp {

ZeroShard::ZeroShard(Communicator& comm, const std::vector<Bucket>& buckets, int64_t arena_numel, int stage)
    : comm_(comm), buckets_(buckets), arena_numel_(arena_numel), stage_(stage),
      layout_(shard_layout(buckets, comm.size(), comm.rank())) {
  DP_CHECK(stage == 1 || stage == 2, "ZeRO stage {}: want 1 or 2", stage);
  for (const ShardPiece& pc : layout_.pieces) pieces_.push_back({pc.arena_begin, pc.len, pc.shard_begin});
  for (size_t b = 0; b < buckets_.size(); ++b) foreign_.push_back(foreign_spans(buckets_[b], layout_.pieces[b]));
}

void ZeroShard::check_paged(const Tensor& grads) const {
  DP_CHECK(stage_ == 2, "ZeRO stage {}: the gradients are not sharded", stage_);
  DP_CHECK(grads.defined() && grads.dtype() == DType::F32 && grads.numel() == arena_numel_ &&
               grads.storage()->mapped() && grads.byte_offset() == 0,
           "ZeRO stage 2: want the flat f32 gradient arena of {} elements on a page mapping of its own, got {}",
           arena_numel_, grads.defined() ? grads.describe() : "an undefined tensor");
}

size_t ZeroShard::release_grads(int bucket, const Tensor& grads) {
  check_paged(grads);
  DP_CHECK(bucket >= 0 && bucket < static_cast<int>(buckets_.size()), "ZeRO: bucket {} of {}", bucket,
           buckets_.size());
  if (measure_peak_) memory_sample_mapped(grads.raw());  // the account's peak (runtime/memory_account.h)
  float* g = grads.data<float>();
  size_t released = 0;
  for (const auto& [b, e] : foreign_[static_cast<size_t>(bucket)])
    released += release_pages(g + b, static_cast<size_t>(e - b) * sizeof(float));
  return released;
}

void ZeroShard::zero_grads(const Tensor& grads) {
  check_paged(grads);
  float* g = grads.data<float>();
  const size_t page = page_size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const ShardPiece& pc = layout_.pieces[b];
    std::memset(g + pc.arena_begin, 0, static_cast<size_t>(pc.len) * sizeof(float));
    for (const auto& [sb, se] : foreign_[b]) {
      char* const lo = reinterpret_cast<char*>(g + sb);
      char* const hi = reinterpret_cast<char*>(g + se);
      const auto [plo, phi] = pages_inside(reinterpret_cast<uintptr_t>(lo), reinterpret_cast<uintptr_t>(hi), page);
      char* const in_lo = reinterpret_cast<char*>(plo);
      char* const in_hi = reinterpret_cast<char*>(phi);
      if (in_lo == in_hi) {  // no whole page inside: all of it kept
        std::memset(lo, 0, static_cast<size_t>(hi - lo));
        continue;
      }
      std::memset(lo, 0, static_cast<size_t>(in_lo - lo));
      std::memset(in_hi, 0, static_cast<size_t>(hi - in_hi));
      release_pages(in_lo, static_cast<size_t>(in_hi - in_lo));
    }
  }
}

int64_t ZeroShard::kept_grad_bytes_bound() const {
  return layout_.numel * static_cast<int64_t>(sizeof(float)) +
         3 * static_cast<int64_t>(page_size()) * static_cast<int64_t>(buckets_.size());
}

double ZeroShard::clip(const Tensor& grads, optim::GradClipper& clipper, void* cuda_stream) {
  DP_CHECK(grads.defined() && grads.dtype() == DType::F32 && grads.numel() == arena_numel_,
           "ZeRO gradient clipping: want the flat f32 gradient arena of {} elements, got {}", arena_numel_,
           grads.defined() ? grads.describe() : "an undefined tensor");
  const auto over_ranks = [this](double local) {
    Tensor sum = Tensor::zeros({1}, DType::F64);
    sum.data<double>()[0] = local;
    comm_.allreduce(sum, ReduceOp::Sum);  // the same bits on every rank
    return sum.data<double>()[0];
  };
  return clipper.clip_pieces(grads, pieces_, over_ranks, cuda_stream);
}

void ZeroShard::step(optim::Optimizer& opt, const Tensor& params, const Tensor& grads, double lr) {
  DP_CHECK(opt.numel() == layout_.numel, "ZeRO: the {} optimizer holds {} elements, the shard of rank {} has {}",
           opt.name(), opt.numel(), layout_.rank, layout_.numel);
  opt.step_pieces(params, grads, pieces_, lr);
}

void ZeroShard::gather_params(const Tensor& params, void* cuda_stream) {
  DP_CHECK(params.defined() && params.numel() == arena_numel_, "ZeRO parameter gather: want the flat arena of {} "
           "elements", arena_numel_);
  if (cuda_stream) device_stream_synchronize(cuda_stream);  // the update's kernels: the pieces are ready
  std::vector<WorkPtr> works;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketScope tag(static_cast<int32_t>(b));
    works.push_back(
        comm_.allgather_blocks_async(params.slice_flat(buckets_[b].begin, {buckets_[b].end - buckets_[b].begin})));
  }
  for (auto& w : works) w->wait();
}

// The state may live on a GPU (the shard optimizer placed there): each bucket is gathered where
// the communicator gathers (on the device for nccl, else on the host; Tensor::copy_from waits for
// the device's work before it copies) and the sink reads host memory.
void ZeroShard::stream_state(const optim::Optimizer& shard, const StateSink& sink) {
  const auto mine = shard.state();
  std::vector<size_t> order(buckets_.size());
  int64_t widest = 0;
  for (size_t b = 0; b < order.size(); ++b) {
    order[b] = b;
    widest = std::max(widest, buckets_[b].end - buckets_[b].begin);
  }
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return buckets_[x].begin < buckets_[y].begin; });
  const Device where = mine.empty() ? Device::cpu() : mine[0].second.device();
  const Device gather_on = where.is_cuda() && comm_.device_native() ? where : Device::cpu();
  const Tensor scratch = mine.empty() ? Tensor() : Tensor::zeros({widest}, DType::F32, gather_on);
  const Tensor host = gather_on.is_cpu() || !sink ? scratch : Tensor::zeros({widest}, DType::F32);
  for (size_t k = 0; k < mine.size(); ++k) {
    const Tensor& src = mine[k].second;
    DP_CHECK(src.dtype() == DType::F32 && src.numel() == layout_.numel && src.device() == where,
             "ZeRO checkpoint state: slot '{}' is {}, want the shard's {} f32 elements on {}", mine[k].first,
             src.describe(), layout_.numel, where.str());
    for (const size_t b : order) {
      const Bucket& bk = buckets_[b];
      const ShardPiece& pc = layout_.pieces[b];
      const Tensor view = scratch.slice_flat(0, {bk.end - bk.begin});
      if (pc.len > 0)
        view.slice_flat(pc.arena_begin - bk.begin, {pc.len}).copy_from(src.slice_flat(pc.shard_begin, {pc.len}));
      BucketScope tag(static_cast<int32_t>(b));
      comm_.allgather_blocks_async(view)->wait();  // the parameters' in-place block all-gather
      if (!sink) continue;
      const Tensor out = host.slice_flat(0, {bk.end - bk.begin});
      if (gather_on.is_cuda()) out.copy_from(view);
      sink(static_cast<int>(k), bk.begin, out.data<float>(), bk.end - bk.begin);
    }
  }
}

}  // namespace dp
