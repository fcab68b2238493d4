#include "runtime/checkpoint/weights_file.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/suggest.h"

namespace dp {
namespace {

constexpr size_t kMaxListed = 20;  // problems named in the error; the rest are counted

std::string sig_str(const TensorSig& s) { return fmt::format("{}{}", dtype_name(s.dtype), shape_str(s.shape)); }

bool matches_any(const std::string& name, const std::vector<std::string>& patterns, std::vector<bool>& used) {
  bool any = false;
  for (size_t i = 0; i < patterns.size(); ++i)
    if (::fnmatch(patterns[i].c_str(), name.c_str(), 0) == 0) any = true, used[i] = true;
  return any;
}

WeightsKind kind_of(const SafetensorsFile& f) {
  const auto it = f.metadata().find("format");
  if (it == f.metadata().end()) return WeightsKind::StateDict;
  if (it->second == kCheckpointFormat) return WeightsKind::DptrainCheckpoint;
  if (it->second == "dptrain-weights") return WeightsKind::DptrainWeights;
  return WeightsKind::StateDict;
}

// The file's weights: every tensor but a checkpoint's optimizer state.
std::vector<TensorSig> file_sigs(const SafetensorsFile& f, WeightsKind kind) {
  std::vector<TensorSig> out;
  for (const auto& n : f.names()) {
    if (kind == WeightsKind::DptrainCheckpoint && n.rfind(kOptimPrefix, 0) == 0) continue;
    out.push_back({n, f.info(n).dtype, f.info(n).shape});
  }
  return out;
}

std::string problems_text(const std::vector<std::string>& problems) {
  std::vector<std::string> shown(problems.begin(), problems.begin() + std::min(problems.size(), kMaxListed));
  std::string s = join(shown, "; ");
  if (problems.size() > kMaxListed) s += fmt::format("; and {} more", problems.size() - kMaxListed);
  return s;
}

}  // namespace

const char* weights_kind_name(WeightsKind k) {
  switch (k) {
    case WeightsKind::DptrainWeights: return "dptrain final weights";
    case WeightsKind::DptrainCheckpoint: return "dptrain checkpoint";
    case WeightsKind::StateDict: return "state_dict";
  }
  return "?";
}

WeightsPlan plan_weights_load(const std::vector<TensorSig>& model, const std::vector<TensorSig>& file,
                              const std::vector<std::string>& skip) {
  WeightsPlan p;
  std::vector<bool> used(skip.size(), false);
  std::map<std::string, const TensorSig*> in_file, in_model;
  for (const auto& s : file) in_file[s.name] = &s;
  for (const auto& s : model) in_model[s.name] = &s;
  for (const auto& m : model) {
    if (matches_any(m.name, skip, used)) {
      p.skipped.push_back(m.name);
      continue;
    }
    const auto it = in_file.find(m.name);
    if (it == in_file.end()) p.problems.push_back(fmt::format("'{}' ({}): in the model, not in the file", m.name, sig_str(m)));
    else if (it->second->dtype != m.dtype || it->second->shape != m.shape)
      p.problems.push_back(
          fmt::format("'{}': the model has {}, the file {}", m.name, sig_str(m), sig_str(*it->second)));
    else p.load.push_back(m.name);
  }
  for (const auto& f : file) {
    if (matches_any(f.name, skip, used)) {
      p.unused.push_back(f.name);
      continue;
    }
    if (!in_model.count(f.name))
      p.problems.push_back(fmt::format("'{}' ({}): in the file, not in the model", f.name, sig_str(f)));
  }
  for (size_t i = 0; i < skip.size(); ++i)
    if (!used[i]) p.problems.push_back(fmt::format("skip pattern '{}' matches no tensor", skip[i]));
  return p;
}

WeightsLoad load_weights(const std::string& path, Graph& model, const std::vector<std::string>& skip,
                         const std::string& fix_hint) {
  const SafetensorsFile f = SafetensorsFile::open(path);  // header, offsets, truncation
  WeightsLoad w;
  w.path = path;
  w.kind = kind_of(f);
  if (w.kind == WeightsKind::DptrainCheckpoint) read_checkpoint_meta(f);  // format version
  std::vector<TensorSig> model_sigs;
  for (const auto& nt : model.state()) model_sigs.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape()});
  w.plan = plan_weights_load(model_sigs, file_sigs(f, w.kind), skip);
  if (!w.plan.problems.empty())
    DP_THROW_USER("weights '{}' ({}) do not fit the model: {} problem{}: {}. {}", path, weights_kind_name(w.kind),
                  w.plan.problems.size(), w.plan.problems.size() == 1 ? "" : "s", problems_text(w.plan.problems),
                  fix_hint);
  // Every byte read (and CRC-checked where the file stores CRCs) before anything changes.
  const auto crcs = stored_crcs(f);
  std::map<std::string, Tensor> host;
  for (const auto& name : w.plan.load) {
    Tensor t = f.get(name);
    if (const auto it = crcs.find(name); it != crcs.end() && tensor_crc(t) != it->second)
      DP_THROW_USER("weights '{}' are corrupt: tensor '{}' fails its CRC-32C check (stored {}, computed {})", path,
                    name, crc_hex(it->second), crc_hex(tensor_crc(t)));
    host.emplace(name, std::move(t));
  }
  for (const auto& nt : model.state())
    if (const auto it = host.find(nt.name); it != host.end()) nt.tensor.copy_from(it->second);
  model.refresh_compute_params();  // 16-bit compute copies follow the loaded masters
  return w;
}

}  // namespace dp
