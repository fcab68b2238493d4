#include "runtime/checkpoint/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"

namespace dp {
namespace {

using json = nlohmann::json;

// The numbers are derived, not drawn from a stateful generator, so there is no RNG state to save:
// resuming at (seed, step, epoch) reproduces every mask and augmentation.
constexpr const char* kRngNote =
    "philox4x32-10 keyed by (seed, stream, step | epoch, sample index); no generator state beyond seed and step";

int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end())
    DP_THROW_USER("checkpoint '{}': metadata '{}' is missing (a damaged or hand-made file?)", f.path(), key);
  int64_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    DP_THROW_USER("checkpoint '{}': metadata '{}' = '{}' is not an integer", f.path(), key, s);
  return v;
}

std::string meta_str(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  return it == f.metadata().end() ? std::string() : it->second;
}


}  // namespace

std::map<std::string, uint32_t> stored_crcs(const SafetensorsFile& f) {
  std::map<std::string, uint32_t> out;
  auto it = f.metadata().find("crc32c");
  if (it == f.metadata().end()) return out;
  json j;
  try {
    j = json::parse(it->second);
  } catch (const json::parse_error& e) {
    DP_THROW_USER("checkpoint '{}': metadata 'crc32c' is not valid JSON ({}): the header is damaged", f.path(),
                  e.what());
  }
  if (!j.is_object()) DP_THROW_USER("checkpoint '{}': metadata 'crc32c' is a JSON {}, not an object", f.path(), j.type_name());
  for (const auto& [name, v] : j.items()) {
    uint32_t crc = 0;
    std::string s = v.is_string() ? v.get<std::string>() : "";
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), crc, 16);
    if (s.size() != 8 || ec != std::errc() || end != s.data() + s.size())
      DP_THROW_USER("checkpoint '{}': tensor '{}': crc32c entry {} is not 8 hex digits", f.path(), name, v.dump());
    out[name] = crc;
  }
  return out;
}

std::map<std::string, std::string> CheckpointMeta::to_metadata() const {
  json sampler = {{"dataset_size", dataset_size}, {"shuffle", shuffle}, {"drop_last", drop_last}};
  std::map<std::string, std::string> out = {{"format", kCheckpointFormat},
          {"format_version", std::to_string(kCheckpointVersion)},
          {"step", std::to_string(step)},
          {"epoch", std::to_string(epoch)},
          {"epoch_samples", std::to_string(epoch_samples)},
          {"seed", std::to_string(seed)},
          {"world_size", std::to_string(world_size)},
          {"batch_size", std::to_string(batch_size)},
          {"dtype_policy", dtype_policy},
          {"sampler", sampler.dump()},
          {"rng", kRngNote},
          {"optimizer", optimizer},
          {"optimizer_steps", std::to_string(optimizer_steps)},
          {"config", config},
          {"classes", classes}};
  if (global_batch > 0) out["global_batch"] = std::to_string(global_batch);  // a re-planned batch only
  return out;
}

std::string crc_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

uint32_t tensor_crc(const Tensor& t) {
  DP_CHECK(t.device().is_cpu(), "tensor_crc of {}: copy it to the host first", t.describe());
  return t.nbytes() == 0 ? crc32c(nullptr, 0) : crc32c(t.raw(), t.nbytes());
}

std::vector<CheckpointEntry> checkpoint_layout(const Graph& model,
                                               const std::vector<std::pair<std::string, DType>>& slots) {
  std::vector<CheckpointEntry> out;
  for (const auto& nt : model.state()) out.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape(), nt.tensor});
  // The optimizer's flat slots follow the parameter arena's layout: sliced by its slots.
  for (const auto& slot : model.params().slots())
    for (size_t k = 0; k < slots.size(); ++k)
      out.push_back({kOptimPrefix + slot.name + "." + slots[k].first, slots[k].second, slot.shape, Tensor(),
                     static_cast<int>(k), slot.offset});
  // Wider elements first keeps every tensor aligned to its element size (the data area starts
  // 8-byte aligned), which zero-copy loaders need; stable, so the order is otherwise the above.
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return dtype_size(a.dtype) > dtype_size(b.dtype); });
  return out;
}

std::vector<StatePart> state_parts(const std::vector<CheckpointEntry>& layout, int slot, int64_t begin, int64_t len) {
  const std::vector<optim::ArenaPiece> span = {{begin, len, 0}};
  std::vector<StatePart> out;
  for (size_t i = 0; i < layout.size(); ++i) {
    const CheckpointEntry& e = layout[i];
    if (e.slot != slot) continue;
    for (const StateCopy& c : state_copies(e.offset, shape_numel(e.shape), span))
      out.push_back({i, c.tensor_begin, c.state_begin, c.len});
  }
  return out;
}

std::vector<std::pair<std::string, DType>> state_slots(const optim::Optimizer& opt) {
  std::vector<std::pair<std::string, DType>> out;
  for (const auto& [name, t] : opt.state()) out.emplace_back(name, t.dtype());
  return out;
}

std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const Graph& model, const optim::Optimizer& opt) {
  DP_CHECK(opt.numel() == model.params().numel(), "optimizer over {} parameters, model has {}", opt.numel(),
           model.params().numel());
  const auto state = opt.state();
  std::vector<std::pair<std::string, Tensor>> out;
  for (CheckpointEntry& e : checkpoint_layout(model, state_slots(opt))) {
    if (e.slot < 0) {
      out.emplace_back(std::move(e.name), e.model);
      continue;
    }
    const Tensor& flat = state[static_cast<size_t>(e.slot)].second;
    out.emplace_back(std::move(e.name), flat.reshape({flat.numel()}).slice_flat(e.offset, e.shape));
  }
  return out;
}

uint32_t metadata_crc(const std::map<std::string, std::string>& metadata) {
  // "key\0value\0" for every entry but the CRC itself, in key order (std::map's): the JSON
  // header's own spelling (spaces, escapes) does not matter, every byte of every value does.
  uint32_t crc = 0;
  std::string buf;
  for (const auto& [k, v] : metadata) {
    if (k == kMetadataCrcKey) continue;
    buf.assign(k);
    buf.push_back('\0');
    buf += v;
    buf.push_back('\0');
    crc = crc32c(buf.data(), buf.size(), crc);
  }
  return crc;
}

namespace {
// The metadata CRC, when the file has one (written since dptrain checks its metadata).
void check_metadata_crc(const SafetensorsFile& f) {
  auto it = f.metadata().find(kMetadataCrcKey);
  if (it == f.metadata().end()) return;  // an older writer: nothing to compare with
  const uint32_t got = metadata_crc(f.metadata());
  if (crc_hex(got) != it->second)
    DP_THROW_USER("checkpoint '{}': its metadata fails its CRC-32C check (stored {}, computed {}): it was changed "
                  "after it was written (edited by hand, or damaged); resume from an earlier checkpoint",
                  f.path(), it->second, crc_hex(got));
}
}  // namespace

CheckpointMeta read_checkpoint_meta(const SafetensorsFile& f) {
  const std::string format = meta_str(f, "format");
  if (format != kCheckpointFormat)
    DP_THROW_USER("'{}' is not a dptrain checkpoint (metadata format = '{}', want '{}'){}", f.path(), format,
                  kCheckpointFormat,
                  format == "dptrain-weights" ? ": final.safetensors holds weights only; resume from checkpoints/" : "");
  const std::string version = meta_str(f, "format_version");
  if (version != std::to_string(kCheckpointVersion))
    DP_THROW_USER("checkpoint '{}' has format_version '{}', but this dptrain reads version {}: resume it with the "
                  "dptrain that wrote it, or start over with --reset",
                  f.path(), version, kCheckpointVersion);
  check_metadata_crc(f);
  CheckpointMeta m;
  m.step = meta_int(f, "step");
  m.epoch = meta_int(f, "epoch");
  m.epoch_samples = meta_int(f, "epoch_samples");
  m.seed = static_cast<uint64_t>(meta_int(f, "seed"));
  m.world_size = meta_int(f, "world_size");
  m.batch_size = meta_int(f, "batch_size");
  m.optimizer_steps = meta_int(f, "optimizer_steps");
  m.optimizer = meta_str(f, "optimizer");
  m.dtype_policy = meta_str(f, "dtype_policy");
  m.config = meta_str(f, "config");
  if (f.metadata().count("classes")) m.classes = meta_str(f, "classes");  // older checkpoints have none
  if (f.metadata().count("global_batch")) m.global_batch = meta_int(f, "global_batch");
  if (m.step < 0 || m.epoch < 0 || m.epoch_samples < 0 || m.world_size < 1 || m.optimizer_steps < 0 ||
      m.global_batch < 0)
    DP_THROW_USER("checkpoint '{}': metadata out of range (step {}, epoch {}, epoch_samples {}, world_size {}, "
                  "optimizer_steps {})",
                  f.path(), m.step, m.epoch, m.epoch_samples, m.world_size, m.optimizer_steps);
  try {
    json s = json::parse(meta_str(f, "sampler"));
    m.dataset_size = s.at("dataset_size").get<int64_t>();
    m.shuffle = s.at("shuffle").get<bool>();
    m.drop_last = s.at("drop_last").get<bool>();
  } catch (const json::exception& e) {
    DP_THROW_USER("checkpoint '{}': metadata 'sampler' = '{}' is not the expected JSON ({})", f.path(),
                  meta_str(f, "sampler"), e.what());
  }
  // Without drop_last the sampler pads the epoch (or the rest of it, after a resume at another
  // world size) to a multiple of the world size: up to world_size - 1 samples past dataset_size
  // are a real position (runtime/data/sampler.h), e.g. 1002 of 1000 on 3 ranks.
  const int64_t padding = m.drop_last ? 0 : m.world_size - 1;
  if (m.dataset_size < 0 || m.epoch_samples > m.dataset_size + padding)
    DP_THROW_USER("checkpoint '{}': metadata epoch_samples = {} is more than the {} samples of an epoch (sampler "
                  "dataset_size): the file is damaged or was edited",
                  f.path(), m.epoch_samples, m.dataset_size);
  return m;
}

std::vector<TensorCrc> check_crcs(const SafetensorsFile& f) {
  const auto crcs = stored_crcs(f);
  std::vector<TensorCrc> out;
  for (const auto& name : f.names()) {
    TensorCrc c;
    c.name = name;
    auto it = crcs.find(name);
    if (it != crcs.end()) c.stored = true, c.expected = it->second;
    c.actual = tensor_crc(f.get(name));
    out.push_back(c);
  }
  for (const auto& [name, crc] : crcs)
    if (!f.has(name))
      DP_THROW_USER("checkpoint '{}': the crc32c map names tensor '{}', which the file does not hold", f.path(), name);
  return out;
}

}  // namespace dp
