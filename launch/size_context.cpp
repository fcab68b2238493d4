#include "launch/size_context.h"

#include <new>

#include "runtime/device_error.h"
#include "runtime/suggest.h"
#include "runtime/tensor.h"

namespace dp::launch {

namespace {
std::string list_of(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return fmt::format("[{}]", join(s));
}
}  // namespace

std::string model_size_keys(const ModelConfig& m) {
  if (m.preset == PresetKind::None) return "the sizes of the [[layer]] list (out_channels, out_features, ...)";
  if (m.preset == PresetKind::Gpt2)
    return fmt::format("model.n_layer = {}, model.n_embd = {}, model.block_size = {}, model.vocab_size = {}", m.n_layer,
                       m.n_embd, m.block_size, m.vocab_size);
  std::string keys = fmt::format("model.num_classes = {}", m.num_classes);
  if (m.preset == PresetKind::Mlp) keys += ", model.hidden = " + list_of(m.hidden);
  return keys;
}

std::string data_size_keys(const DataConfig& d) {
  if (d.dataset == data::DatasetKind::Synthetic)
    return fmt::format("data.synthetic_shape = {}, data.synthetic_train = {}, data.synthetic_eval = {}",
                       list_of(d.synthetic_shape), d.synthetic_train, d.synthetic_eval);
  switch (d.dataset) {
    case data::DatasetKind::ImageFolder:
    case data::DatasetKind::TarShards: return fmt::format("data.image_size = {}, data.workers = {}", d.image_size, d.workers);
    case data::DatasetKind::Tokens: return "data.path / data.val_path (token shards are memory-mapped, not read whole)";
    default: return "data.train_limit / data.eval_limit (the data set's files are read whole)";
  }
}

void with_size_context(const std::string& what, const std::string& keys, const std::function<void()>& f) {
  std::string detail;
  try {
    f();
    return;
  } catch (const HostMemoryError& e) {
    detail = fmt::format("one tensor of {:.1f} GiB, the machine has {:.1f} GiB", static_cast<double>(e.bytes) / (1u << 30),
                         static_cast<double>(e.machine_bytes) / (1u << 30));
  } catch (const std::bad_alloc&) {
    detail = fmt::format("an allocation failed; the machine has {:.1f} GiB",
                         static_cast<double>(host_memory_bytes()) / (1u << 30));
  } catch (const std::length_error&) {
    detail = "a size beyond what one allocation can hold";
  } catch (DeviceOutOfMemory& e) {  // keeps its type (and dptrain's exit status for it)
    e.add_context(what);
    throw;
  }
  DP_THROW_USER("{} needs more memory than this machine has ({}); make it smaller: {}", what, detail, keys);
}

}  // namespace dp::launch
