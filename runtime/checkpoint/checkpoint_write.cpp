// write_checkpoint and CheckpointStream: the model and optimizer state, each tensor's CRC-32C, the
// metadata, written atomically; one writer for both (write_checkpoint appends each tensor whole).
#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "runtime/checkpoint/checkpoint.h"

namespace dp {
namespace {

std::vector<SafetensorsSpec> specs_of(const std::vector<CheckpointEntry>& layout) {
  std::vector<SafetensorsSpec> out;
  for (const CheckpointEntry& e : layout) out.push_back({e.name, e.dtype, e.shape});
  return out;
}

// The file's metadata: `meta`'s, the tensors' CRCs (crcs null: placeholders of the same length,
// for the header's size before the bytes are known), and the CRC of all of it.
std::map<std::string, std::string> file_metadata(const CheckpointMeta& meta, const std::vector<CheckpointEntry>& layout,
                                                 const std::vector<uint32_t>* crcs) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < layout.size(); ++i) j[layout[i].name] = crc_hex(crcs ? (*crcs)[i] : 0);
  auto metadata = meta.to_metadata();
  metadata["crc32c"] = j.dump();
  metadata[kMetadataCrcKey] = crc_hex(metadata_crc(metadata));
  return metadata;
}

}  // namespace

CheckpointStream::CheckpointStream(const std::string& path, std::vector<CheckpointEntry> layout,
                                   const CheckpointMeta& meta, std::function<void(size_t, size_t)> after_tensor)
    : layout_(std::move(layout)),
      meta_(meta),
      after_tensor_(std::move(after_tensor)),
      written_(layout_.size(), 0),
      crc_(layout_.size(), crc32c(nullptr, 0)),
      out_(path, specs_of(layout_), file_metadata(meta_, layout_, nullptr)) {}

void CheckpointStream::append(size_t i, const void* data, size_t bytes) {
  DP_CHECK(i < layout_.size(), "checkpoint stream: tensor {} of {}", i, layout_.size());
  const size_t total = bytes_of(layout_[i].shape, layout_[i].dtype);
  DP_CHECK(written_[i] + bytes <= total, "checkpoint stream: tensor '{}' has {} bytes, {} more given after {}",
           layout_[i].name, total, bytes, written_[i]);
  if (bytes == 0) return;
  out_.write(i, written_[i], data, bytes);
  crc_[i] = crc32c(data, bytes, crc_[i]);
  written_[i] += bytes;
  if (written_[i] == total) completed();
}

void CheckpointStream::completed() {
  ++complete_;
  if (after_tensor_) after_tensor_(complete_ - 1, layout_.size());
}

void CheckpointStream::append_model() {
  for (size_t i = 0; i < layout_.size(); ++i) {
    const Tensor& t = layout_[i].model;
    if (!t.defined()) continue;
    if (t.nbytes() == 0) {
      completed();
    } else {
      const Tensor host = t.on_host();
      append(i, host.raw(), host.nbytes());
    }
  }
}

void CheckpointStream::append_state(int slot, int64_t begin, const float* data, int64_t len) {
  for (const StatePart& p : state_parts(layout_, slot, begin, len)) {
    const CheckpointEntry& e = layout_[p.entry];
    DP_CHECK(e.dtype == DType::F32, "checkpoint stream: '{}' is {}, the state arrives as f32", e.name,
             dtype_name(e.dtype));
    DP_CHECK(static_cast<size_t>(p.tensor_begin) * sizeof(float) == written_[p.entry],
             "checkpoint stream: '{}' element {} arrived with {} bytes written (out of order)", e.name, p.tensor_begin,
             written_[p.entry]);
    append(p.entry, data + p.span_begin, static_cast<size_t>(p.len) * sizeof(float));
  }
}

void CheckpointStream::commit() {
  for (size_t i = 0; i < layout_.size(); ++i) {
    const size_t total = bytes_of(layout_[i].shape, layout_[i].dtype);
    DP_CHECK(written_[i] == total, "checkpoint stream: '{}' has {} of its {} bytes at commit", layout_[i].name,
             written_[i], total);
  }
  out_.commit(file_metadata(meta_, layout_, &crc_));
}

void write_checkpoint(const std::string& path, const Graph& model, const optim::Optimizer& opt,
                      const CheckpointMeta& meta) {
  write_checkpoint_tensors(path, checkpoint_tensors(model, opt), meta);
}

void write_checkpoint_tensors(const std::string& path, std::vector<std::pair<std::string, Tensor>> tensors,
                              const CheckpointMeta& meta, const std::function<void(size_t, size_t)>& after_tensor) {
  std::vector<CheckpointEntry> layout;
  for (auto& [name, t] : tensors) {
    DP_CHECK(t.defined(), "writing '{}': tensor '{}' is undefined", path, name);
    layout.push_back({name, t.dtype(), t.shape(), t});
  }
  CheckpointStream out(path, std::move(layout), meta, after_tensor);
  out.append_model();
  out.commit();
}

}  // namespace dp
