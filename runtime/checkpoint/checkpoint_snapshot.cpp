#include "runtime/checkpoint/checkpoint_snapshot.h"

namespace dp {
namespace {
constexpr size_t kAlign = 64;  // each tensor's offset in the block
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

size_t CheckpointSnapshot::bytes() const { return block_ ? block_->bytes() : 0; }

// One view of the block per live tensor, in their order; a new block only when the sizes changed.
void CheckpointSnapshot::layout(const std::vector<std::pair<std::string, Tensor>>& live) {
  size_t total = 0;
  for (const auto& [name, t] : live) total += aligned(t.nbytes());
  bool same = block_ && block_->bytes() == total && tensors_.size() == live.size();
  for (size_t i = 0; same && i < live.size(); ++i)
    same = tensors_[i].first == live[i].first && tensors_[i].second.fits(live[i].second.shape(), live[i].second.dtype(),
                                                                         Device::cpu());
  if (same) return;
  tensors_.clear();
  pinned_.reset();
  block_ = Storage::allocate(total, Device::cpu());
  size_t offset = 0;
  for (const auto& [name, t] : live) {
    tensors_.emplace_back(name, Tensor::view_of(block_, offset, t.shape(), t.dtype()));
    offset += aligned(t.nbytes());
  }
}

void CheckpointSnapshot::take(const Graph& model, const optim::Optimizer& opt, const CheckpointMeta& meta,
                              void* stream) {
  const auto live = checkpoint_tensors(model, opt);
  layout(live);
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

void CheckpointSnapshot::write(const std::string& path, const std::function<void(size_t, size_t)>& after_tensor) const {
  DP_CHECK(taken(), "CheckpointSnapshot::write('{}') before take()", path);
  write_checkpoint_tensors(path, tensors_, meta_, after_tensor);
}

}  // namespace dp
