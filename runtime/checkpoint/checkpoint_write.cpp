// write_checkpoint: the model and optimizer state, each tensor's CRC-32C, the metadata, written
// atomically.
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"

namespace dp {

void write_checkpoint(const std::string& path, const Graph& model, const optim::Optimizer& opt,
                      const CheckpointMeta& meta) {
  write_checkpoint_tensors(path, checkpoint_tensors(model, opt), meta);
}

void write_checkpoint_tensors(const std::string& path, std::vector<std::pair<std::string, Tensor>> tensors,
                              const CheckpointMeta& meta, const std::function<void(size_t, size_t)>& after_tensor) {
  nlohmann::json crcs = nlohmann::json::object();
  for (auto& [name, t] : tensors) {
    if (!t.device().is_cpu()) {
      Tensor host = Tensor::zeros(t.shape(), t.dtype(), Device::cpu());
      host.copy_from(t);
      t = host;
    }
    crcs[name] = crc_hex(tensor_crc(t));
  }
  auto metadata = meta.to_metadata();
  metadata["crc32c"] = crcs.dump();
  metadata[kMetadataCrcKey] = crc_hex(metadata_crc(metadata));
  write_safetensors(path, tensors, metadata, after_tensor);
}

}  // namespace dp
