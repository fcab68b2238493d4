#include "collectives/reducer.h"

#include <algorithm>

namespace dp {

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& slot_numel, int64_t first_cap, int64_t cap) {
  std::vector<int64_t> offset(slot_numel.size() + 1, 0);
  for (size_t i = 0; i < slot_numel.size(); ++i) offset[i + 1] = offset[i] + slot_numel[i];
  std::vector<Bucket> out;
  Bucket cur;
  int64_t size = 0;
  for (int s = static_cast<int>(slot_numel.size()) - 1; s >= 0; --s) {
    if (cur.slots.empty()) cur.end = offset[s + 1];
    cur.slots.push_back(s);
    cur.begin = offset[s];
    size += slot_numel[s];
    if (size >= (out.empty() ? first_cap : cap)) {
      out.push_back(std::move(cur));
      cur = Bucket{};
      size = 0;
    }
  }
  if (!cur.slots.empty()) out.push_back(std::move(cur));
  return out;
}

Reducer::Reducer(Communicator& comm, Graph& graph, int64_t first_bucket_bytes, int64_t bucket_bytes, bool overlap)
    : comm_(comm), graph_(graph), overlap_(overlap) {
  std::vector<int64_t> numel;
  for (const auto& s : graph.grads().slots()) numel.push_back(s.numel);
  buckets_ = assign_buckets(numel, std::max<int64_t>(1, first_bucket_bytes / 4), std::max<int64_t>(1, bucket_bytes / 4));
  bucket_of_slot_.assign(numel.size(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int s : buckets_[b].slots) bucket_of_slot_[s] = static_cast<int>(b);
  works_.resize(buckets_.size());
}

void Reducer::prepare() {
  pending_.clear();
  for (const auto& b : buckets_) pending_.push_back(static_cast<int>(b.slots.size()));
  ready_.assign(bucket_of_slot_.size(), 0);
  std::fill(works_.begin(), works_.end(), nullptr);
}

void Reducer::launch(size_t b) {
  const Bucket& bk = buckets_[b];
  works_[b] = comm_.allreduce_async(graph_.grads().flat().slice_flat(bk.begin, {bk.end - bk.begin}), ReduceOp::Avg);
}

void Reducer::on_ready(int node) {
  DP_CHECK(!pending_.empty(), "Reducer::on_ready before prepare");
  for (int s : graph_.nodes()[node].param_slots) {
    const int b = bucket_of_slot_[s];
    DP_CHECK(!ready_[s], "gradient of '{}' reported ready twice in one step", graph_.grads().slot(s).name);
    ready_[s] = 1;
    if (--pending_[b] == 0 && overlap_) launch(b);
  }
}

void Reducer::finalize() {
  std::string missing;
  for (size_t s = 0; s < ready_.size(); ++s)
    if (!ready_[s]) missing += (missing.empty() ? "" : ", ") + graph_.grads().slot(static_cast<int>(s)).name;
  if (!missing.empty())
    throw DpError(fmt::format("[{}] these parameters got no gradient this step: {}; every parameter must take part in "
                              "the loss",
                              identity_string(), missing));
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!works_[b]) launch(b);
  for (auto& w : works_) w->wait();
  pending_.clear();
}

}  // namespace dp
