// load_checkpoint: every check first (format, names, dtypes, shapes, CRCs) into host tensors,
// then the restore, so a failed load changes nothing.
#include <map>

#include "runtime/checkpoint/checkpoint.h"

namespace dp {
namespace {

std::string dtype_shape(DType d, const Shape& s) { return fmt::format("{}{}", dtype_name(d), shape_str(s)); }

using Named = std::vector<std::pair<std::string, Tensor>>;

// What the file must hold, in file-writing order: name -> live destination (the model's state;
// host tensors for the optimizer's per-parameter slices).
Named expected_tensors(const Graph& model, const Named& opt_state) {
  Named want;
  for (const auto& nt : model.state()) want.emplace_back(nt.name, nt.tensor);
  for (const auto& slot : model.params().slots())
    for (const auto& [sname, flat] : opt_state)
      want.emplace_back(kOptimPrefix + slot.name + "." + sname, Tensor::zeros(slot.shape, flat.dtype(), Device::cpu()));
  return want;
}

void check_optimizer_kind(const SafetensorsFile& f, const CheckpointMeta& meta, const optim::Optimizer& opt,
                          const Named& opt_state) {
  if (meta.optimizer == opt.name()) return;
  bool has_optim_tensors = false;
  for (const auto& n : f.names()) has_optim_tensors = has_optim_tensors || n.rfind(kOptimPrefix, 0) == 0;
  if (has_optim_tensors || !opt_state.empty())
    DP_THROW_USER("checkpoint '{}' holds {} optimizer state, but this run uses train.optimizer = \"{}\": set it "
                  "back, or start over with --reset",
                  f.path(), meta.optimizer.empty() ? std::string("no") : meta.optimizer, opt.name());
}

// Names, dtypes and shapes against the model and the optimizer, in file-writing order, so the
// first mismatch named is the first tensor of the model that differs.
void check_names_and_shapes(const SafetensorsFile& f, const Named& want) {
  const std::string& path = f.path();
  for (const auto& [name, t] : want) {
    if (!f.has(name))
      DP_THROW_USER("checkpoint '{}' does not match the model: it has no tensor '{}' ({}), the first one missing; "
                    "was it written for another model or optimizer? (start over with --reset)",
                    path, name, dtype_shape(t.dtype(), t.shape()));
    const auto& info = f.info(name);
    if (info.dtype != t.dtype() || info.shape != t.shape())
      DP_THROW_USER("checkpoint '{}' does not match the model: tensor '{}' is {} in the checkpoint but {} in the model; "
                    "was it written for another model? (start over with --reset)",
                    path, name, dtype_shape(info.dtype, info.shape), dtype_shape(t.dtype(), t.shape()));
  }
  if (f.names().size() == want.size()) return;
  for (const auto& name : f.names()) {
    bool known = false;
    for (const auto& [n, t] : want) known = known || n == name;
    if (!known)
      DP_THROW_USER("checkpoint '{}' does not match the model: it has tensor '{}', which this {} does not have; "
                    "was it written for another model? (start over with --reset)",
                    path, name, name.rfind(kOptimPrefix, 0) == 0 ? "optimizer" : "model");
  }
}

// Every byte against its CRC, into host tensors; nothing is changed until all are good.
std::map<std::string, Tensor> read_verified(const SafetensorsFile& f, const Named& want) {
  const auto crcs = stored_crcs(f);
  std::map<std::string, Tensor> loaded;
  for (const auto& [name, t] : want) {
    auto it = crcs.find(name);
    if (it == crcs.end())
      DP_THROW_USER("checkpoint '{}': tensor '{}' has no crc32c entry (damaged header?)", f.path(), name);
    Tensor host = f.get(name);
    const uint32_t got = tensor_crc(host);
    if (got != it->second)
      DP_THROW_USER("checkpoint '{}' is corrupt: tensor '{}' fails its CRC-32C check (stored {}, computed {})",
                    f.path(), name, crc_hex(it->second), crc_hex(got));
    loaded.emplace(name, std::move(host));
  }
  return loaded;
}

// Restore. Each destination lives on the model's device; copy_from maps host -> device.
void restore(const std::map<std::string, Tensor>& loaded, const CheckpointMeta& meta, Graph& model,
             optim::Optimizer& opt, const Named& opt_state) {
  for (const auto& nt : model.state()) nt.tensor.copy_from(loaded.at(nt.name));
  Named flat_state;
  for (const auto& [sname, live] : opt_state) {
    Tensor flat = Tensor::zeros({opt.numel()}, live.dtype(), Device::cpu());
    for (const auto& slot : model.params().slots())
      flat.slice_flat(slot.offset, slot.shape).copy_from(loaded.at(kOptimPrefix + slot.name + "." + sname));
    flat_state.emplace_back(sname, std::move(flat));
  }
  opt.load_state(flat_state, meta.optimizer_steps);
}

}  // namespace

CheckpointMeta load_checkpoint(const std::string& path, Graph& model, optim::Optimizer& opt) {
  SafetensorsFile f = SafetensorsFile::open(path);  // header, offsets, truncation
  CheckpointMeta meta = read_checkpoint_meta(f);
  const Named opt_state = opt.state();
  check_optimizer_kind(f, meta, opt, opt_state);
  const Named want = expected_tensors(model, opt_state);
  check_names_and_shapes(f, want);
  restore(read_verified(f, want), meta, model, opt, opt_state);
  return meta;
}

}  // namespace dp
