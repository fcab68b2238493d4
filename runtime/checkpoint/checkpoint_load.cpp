// load_checkpoint: every check first (format, names, dtypes, shapes, CRCs), then the restore, so a
// failed load changes nothing. Streamed, one tensor at a time: pass 1 reads each tensor, checks its
// CRC and drops it; pass 2 reads it again (from the page cache, mostly) and copies it into place:
// the model's state whole, the optimizer's state straight into the elements the optimizer holds
// (the whole arena, or a ZeRO rank's pieces of it: state_copies). So the transient host memory is
// the largest tensor of the file, not the file, whatever the number of ranks.
#include <algorithm>

#include "runtime/checkpoint/checkpoint.h"

namespace dp {
namespace {

std::string dtype_shape(DType d, const Shape& s) { return fmt::format("{}{}", dtype_name(d), shape_str(s)); }

using Named = std::vector<std::pair<std::string, Tensor>>;

struct Expected {
  std::string name;
  DType dtype;
  Shape shape;
};

// What the file must hold, in file-writing order: the model's state, then the optimizer's state
// per parameter slot (no memory: names, dtypes and shapes only).
std::vector<Expected> expected_tensors(const Graph& model, const Named& opt_state) {
  std::vector<Expected> want;
  for (const auto& nt : model.state()) want.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape()});
  for (const auto& slot : model.params().slots())
    for (const auto& [sname, flat] : opt_state) want.push_back({kOptimPrefix + slot.name + "." + sname, flat.dtype(), slot.shape});
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
void check_names_and_shapes(const SafetensorsFile& f, const std::vector<Expected>& want) {
  const std::string& path = f.path();
  for (const auto& w : want) {
    if (!f.has(w.name))
      DP_THROW_USER("checkpoint '{}' does not match the model: it has no tensor '{}' ({}), the first one missing; "
                    "was it written for another model or optimizer? (start over with --reset)",
                    path, w.name, dtype_shape(w.dtype, w.shape));
    const auto& info = f.info(w.name);
    if (info.dtype != w.dtype || info.shape != w.shape)
      DP_THROW_USER("checkpoint '{}' does not match the model: tensor '{}' is {} in the checkpoint but {} in the model; "
                    "was it written for another model? (start over with --reset)",
                    path, w.name, dtype_shape(info.dtype, info.shape), dtype_shape(w.dtype, w.shape));
  }
  if (f.names().size() == want.size()) return;
  for (const auto& name : f.names()) {
    bool known = false;
    for (const auto& w : want) known = known || w.name == name;
    if (!known)
      DP_THROW_USER("checkpoint '{}' does not match the model: it has tensor '{}', which this {} does not have; "
                    "was it written for another model? (start over with --reset)",
                    path, name, name.rfind(kOptimPrefix, 0) == 0 ? "optimizer" : "model");
  }
}

// Pass 1: every byte against its CRC, one tensor in memory at a time.
void verify_crcs(const SafetensorsFile& f, const std::vector<Expected>& want) {
  const auto crcs = stored_crcs(f);
  for (const auto& w : want) {
    auto it = crcs.find(w.name);
    if (it == crcs.end())
      DP_THROW_USER("checkpoint '{}': tensor '{}' has no crc32c entry (damaged header?)", f.path(), w.name);
    const uint32_t got = tensor_crc(f.get(w.name));
    if (got != it->second)
      DP_THROW_USER("checkpoint '{}' is corrupt: tensor '{}' fails its CRC-32C check (stored {}, computed {})",
                    f.path(), w.name, crc_hex(it->second), crc_hex(got));
  }
}

// The optimizer holds `pieces` of the arena (all of it when empty): what the caller built, so a
// mismatch is a program error (DpError), not the file's.
std::vector<optim::ArenaPiece> checked_pieces(const Graph& model, const optim::Optimizer& opt, const Named& opt_state,
                                              std::vector<optim::ArenaPiece> pieces) {
  const int64_t arena = model.params().numel();
  if (pieces.empty()) pieces.push_back({0, arena, 0});
  int64_t total = 0;
  for (const auto& pc : pieces) {
    DP_CHECK(pc.len >= 0 && pc.arena_begin >= 0 && pc.arena_begin + pc.len <= arena && pc.state_begin >= 0 &&
                 pc.state_begin + pc.len <= opt.numel(),
             "checkpoint load: piece [{}, +{}) -> state {} outside the arena ({}) or the {} optimizer ({})",
             pc.arena_begin, pc.len, pc.state_begin, arena, opt.name(), opt.numel());
    total += pc.len;
  }
  DP_CHECK(total == opt.numel(), "checkpoint load: the {} optimizer holds {} elements, its pieces of the arena {}",
           opt.name(), opt.numel(), total);
  for (const auto& [sname, t] : opt_state)
    DP_CHECK(t.dtype() == DType::F32 && t.numel() == opt.numel(), "checkpoint load: the {} optimizer's '{}' is {}",
             opt.name(), sname, t.describe());
  return pieces;
}

// Pass 2 for the optimizer: each "optim.<slot>.<state>" read once, the elements this optimizer
// holds copied into its live state (host -> device as copy_from maps it), then the step count.
void restore_optimizer(const SafetensorsFile& f, const CheckpointMeta& meta, const Graph& model,
                       optim::Optimizer& opt, const Named& opt_state, const std::vector<optim::ArenaPiece>& pieces) {
  for (const auto& slot : model.params().slots())
    for (const auto& [sname, live] : opt_state) {
      const std::vector<StateCopy> copies = state_copies(slot.offset, slot.numel, pieces);
      if (copies.empty()) continue;
      const Tensor host = f.get(kOptimPrefix + slot.name + "." + sname);  // (slot.shape), f32
      const Tensor dst = live.reshape({live.numel()});
      for (const StateCopy& c : copies)
        dst.slice_flat(c.state_begin, {c.len}).copy_from(host.slice_flat(c.tensor_begin, {c.len}));
    }
  opt.restore_steps(meta.optimizer_steps);
}

}  // namespace

std::vector<StateCopy> state_copies(int64_t slot_offset, int64_t slot_numel,
                                    const std::vector<optim::ArenaPiece>& pieces) {
  std::vector<StateCopy> out;
  for (const auto& pc : pieces) {
    const int64_t lo = std::max(slot_offset, pc.arena_begin);
    const int64_t hi = std::min(slot_offset + slot_numel, pc.arena_begin + pc.len);
    if (lo < hi) out.push_back({lo - slot_offset, pc.state_begin + (lo - pc.arena_begin), hi - lo});
  }
  return out;
}

CheckpointMeta load_checkpoint(const std::string& path, Graph& model, optim::Optimizer& opt,
                               const std::vector<optim::ArenaPiece>& pieces) {
  SafetensorsFile f = SafetensorsFile::open(path);  // header, offsets, truncation
  CheckpointMeta meta = read_checkpoint_meta(f);
  const Named opt_state = opt.state();
  const std::vector<optim::ArenaPiece> mine = checked_pieces(model, opt, opt_state, pieces);
  check_optimizer_kind(f, meta, opt, opt_state);
  if (meta.optimizer_steps < 0)
    DP_THROW_USER("checkpoint '{}': optimizer_steps = {} is negative (damaged metadata?); resume from another one, "
                  "or start over with --reset", path, meta.optimizer_steps);
  const std::vector<Expected> want = expected_tensors(model, opt_state);
  check_names_and_shapes(f, want);
  verify_crcs(f, want);
  // Everything is good: now change things (pass 2).
  for (const auto& nt : model.state()) nt.tensor.copy_from(f.get(nt.name));
  restore_optimizer(f, meta, model, opt, opt_state, mine);
  return meta;
}

}  // namespace dp
