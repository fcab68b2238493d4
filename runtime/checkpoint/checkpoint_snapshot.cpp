#include "runtime/checkpoint/checkpoint_snapshot.h"

#include <cstring>

namespace dp {
namespace {
constexpr size_t kAlign = 64;  // each tensor's offset in the block
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

size_t CheckpointSnapshot::bytes() const { return block_ ? block_->bytes() : 0; }

// One view of the block per tensor, in their order; a new block only when the sizes changed.
void CheckpointSnapshot::layout(const std::vector<SafetensorsSpec>& specs) {
  size_t total = 0;
  for (const SafetensorsSpec& t : specs)
    total += aligned(bytes_of(t.shape, t.dtype));
  bool same = block_ && block_->bytes() == total && tensors_.size() == specs.size();
  for (size_t i = 0; same && i < specs.size(); ++i)
    same = tensors_[i].first == specs[i].name && tensors_[i].second.fits(specs[i].shape, specs[i].dtype, Device::cpu());
  if (same) return;
  tensors_.clear();
  pinned_.reset();
  block_ = Storage::allocate(total, Device::cpu());
  size_t offset = 0;
  for (const SafetensorsSpec& t : specs) {
    tensors_.emplace_back(t.name, Tensor::view_of(block_, offset, t.shape, t.dtype));
    offset += aligned(tensors_.back().second.nbytes());
  }
}

void CheckpointSnapshot::take(const Graph& model, const optim::Optimizer& opt, const CheckpointMeta& meta,
                              void* stream) {
  const auto live = checkpoint_tensors(model, opt);
  std::vector<SafetensorsSpec> specs;
  for (const auto& [name, t] : live) specs.push_back({name, t.dtype(), t.shape()});
  layout(specs);
  std::vector<std::pair<Tensor, Tensor>> from_device;
  for (size_t i = 0; i < live.size(); ++i) {
    const Tensor& src = live[i].second;
    if (src.device().is_cpu()) tensors_[i].second.copy_from(src);
    else from_device.emplace_back(tensors_[i].second, src);
  }
  if (!from_device.empty()) {
    DP_CHECK(stream != nullptr, "a checkpoint snapshot of device tensors needs the stream they are ordered on");
    if (!pinned_) pinned_ = detail::pin_host_memory(block_->data(), block_->bytes());
    detail::copy_to_host_on_stream(from_device, stream);
  }
  meta_ = meta;
}

void CheckpointSnapshot::take_streamed(std::vector<CheckpointEntry> entries, const CheckpointMeta& meta,
                                       const std::function<void(const optim::StateSink&)>& feed) {
  std::vector<SafetensorsSpec> specs;
  for (const CheckpointEntry& e : entries) specs.push_back({e.name, e.dtype, e.shape});
  layout(specs);
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].model.defined()) tensors_[i].second.copy_from(entries[i].model);
  std::vector<int64_t> filled(entries.size(), 0);
  feed([&](int slot, int64_t begin, const float* data, int64_t len) {
    for (const StatePart& p : state_parts(entries, slot, begin, len)) {
      const Tensor& t = tensors_[p.entry].second;
      DP_CHECK(t.dtype() == DType::F32, "checkpoint snapshot: '{}' is {}, the state arrives as f32",
               tensors_[p.entry].first, t.describe());
      std::memcpy(t.data<float>() + p.tensor_begin, data + p.span_begin, static_cast<size_t>(p.len) * sizeof(float));
      filled[p.entry] += p.len;
    }
  });
  // Every element of the state came (no stale element of an earlier snapshot is written).
  for (size_t i = 0; i < entries.size(); ++i)
    DP_CHECK(entries[i].model.defined() || filled[i] == shape_numel(entries[i].shape),
             "checkpoint snapshot: '{}' received {} of its {} elements", entries[i].name, filled[i],
             shape_numel(entries[i].shape));
  meta_ = meta;
}

void CheckpointSnapshot::write(const std::string& path, const std::function<void(size_t, size_t)>& after_tensor) const {
  DP_CHECK(taken(), "CheckpointSnapshot::write('{}') before take()", path);
  write_checkpoint_tensors(path, tensors_, meta_, after_tensor);
}

}  // namespace dp
