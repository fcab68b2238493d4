#include "runtime/checkpoint/weights_file.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

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

namespace {

// The model tensors whose tied alias the file holds (and no pattern skips): their owners are loaded
// through the alias.
std::set<std::string> owners_with_alias_in_file(const std::vector<TensorSig>& model,
                                                const std::map<std::string, const TensorSig*>& in_file,
                                                const std::vector<std::string>& skip, std::vector<bool>& used) {
  std::set<std::string> out;
  for (const auto& m : model)
    if (!m.alias_of.empty() && in_file.count(m.name) && !matches_any(m.name, skip, used)) out.insert(m.alias_of);
  return out;
}

}  // namespace

WeightsPlan plan_weights_load(const std::vector<TensorSig>& model, const std::vector<TensorSig>& file,
                              const std::vector<std::string>& skip) {
  WeightsPlan p;
  std::vector<bool> used(skip.size(), false);
  std::map<std::string, const TensorSig*> in_file, in_model;
  for (const auto& s : file) in_file[s.name] = &s;
  for (const auto& s : model) in_model[s.name] = &s;
  const std::set<std::string> via_alias = owners_with_alias_in_file(model, in_file, skip, used);
  std::set<std::string> skipped;
  for (const auto& m : model) {
    // A tied alias follows its owner: skipping the owner skips it (it is the same tensor).
    if (matches_any(m.name, skip, used) || (!m.alias_of.empty() && skipped.count(m.alias_of))) {
      p.skipped.push_back(m.name);
      skipped.insert(m.name);
      continue;
    }
    const auto it = in_file.find(m.name);
    if (it == in_file.end()) {
      // An alias missing from the file comes from its owner; an owner from its alias if there.
      if (m.alias_of.empty() && !via_alias.count(m.name))
        p.problems.push_back(fmt::format("'{}' ({}): in the model, not in the file", m.name, sig_str(m)));
    } else if (it->second->dtype != m.dtype || it->second->shape != m.shape) {
      p.problems.push_back(
          fmt::format("'{}': the model has {}, the file {}", m.name, sig_str(m), sig_str(*it->second)));
    } else {
      p.load.push_back(m.name);
    }
  }
  for (const auto& f : file) {
    if (matches_any(f.name, skip, used) || skipped.count(f.name)) {
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

std::vector<TensorSig> translate_sigs(const std::vector<TensorSig>& file, const WeightsTranslation& t) {
  std::vector<TensorSig> out;
  for (const auto& s : file) {
    if (t.ignore.count(s.name)) continue;
    TensorSig m = s;
    if (const auto it = t.rename.find(s.name); it != t.rename.end()) m.name = it->second;
    if (t.transpose.count(s.name) && m.shape.size() == 2) std::swap(m.shape[0], m.shape[1]);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// A 2-D tensor's transpose (any element type), as a new CPU tensor.
Tensor transposed(const Tensor& t) {
  DP_CHECK(t.ndim() == 2, "transposing {}", t.describe());
  const int64_t R = t.dim(0), C = t.dim(1);
  const size_t e = dtype_size(t.dtype());
  Tensor out = Tensor::zeros({C, R}, t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) std::memcpy(dst + (c * R + r) * e, src + (r * C + c) * e, e);
  return out;
}

// Every tensor the plan loads, read (CRC-checked where the file stores CRCs, transposed where the
// translation says) before anything changes; keyed by model name.
std::map<std::string, Tensor> read_planned(const SafetensorsFile& f, const std::string& path, const WeightsPlan& plan,
                                           const WeightsTranslation& tr) {
  std::map<std::string, std::string> file_name;  // model name -> file name
  for (const auto& [from, to] : tr.rename) file_name[to] = from;
  const auto crcs = stored_crcs(f);
  std::map<std::string, Tensor> host;
  for (const auto& name : plan.load) {
    const auto fn = file_name.count(name) ? file_name.at(name) : name;
    Tensor t = f.get(fn);
    if (const auto it = crcs.find(fn); it != crcs.end() && tensor_crc(t) != it->second)
      DP_THROW_USER("weights '{}' are corrupt: tensor '{}' fails its CRC-32C check (stored {}, computed {})", path, fn,
                    crc_hex(it->second), crc_hex(tensor_crc(t)));
    host.emplace(name, tr.transpose.count(fn) ? transposed(t) : std::move(t));
  }
  return host;
}

// Both names of a tied parameter in the file: they must hold the same values.
void check_tied_equal(const std::string& path, const std::vector<Graph::NamedTensor>& state,
                      const std::map<std::string, Tensor>& host) {
  for (const auto& nt : state) {
    if (nt.alias_of.empty() || !host.count(nt.name) || !host.count(nt.alias_of)) continue;
    const Tensor &a = host.at(nt.name), &b = host.at(nt.alias_of);
    if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0)
      DP_THROW_USER("weights '{}': '{}' and '{}' are one tied parameter in this model, but the file holds different "
                    "values for them; keep one of them in the file (either is enough) or make them equal",
                    path, nt.name, nt.alias_of);
  }
}

}  // namespace

WeightsLoad load_weights(const std::string& path, Graph& model, const std::vector<std::string>& skip,
                         const std::string& fix_hint, const WeightsTranslator& translate) {
  const SafetensorsFile f = SafetensorsFile::open(path);  // header, offsets, truncation
  WeightsLoad w;
  w.path = path;
  w.kind = kind_of(f);
  if (w.kind == WeightsKind::DptrainCheckpoint) read_checkpoint_meta(f);  // format version
  const std::vector<Graph::NamedTensor> state = model.state();
  std::vector<TensorSig> model_sigs;
  for (const auto& nt : state) model_sigs.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape(), nt.alias_of});
  const std::vector<TensorSig> raw = file_sigs(f, w.kind);
  const WeightsTranslation tr = translate ? translate(raw) : WeightsTranslation{};
  w.translated = tr.kind;
  w.plan = plan_weights_load(model_sigs, translate_sigs(raw, tr), skip);
  if (!w.plan.problems.empty())
    DP_THROW_USER("weights '{}' ({}{}) do not fit the model: {} problem{}: {}. {}", path, weights_kind_name(w.kind),
                  tr.kind.empty() ? "" : ", read as " + tr.kind, w.plan.problems.size(),
                  w.plan.problems.size() == 1 ? "" : "s", problems_text(w.plan.problems), fix_hint);
  const std::map<std::string, Tensor> host = read_planned(f, path, w.plan, tr);
  check_tied_equal(path, state, host);
  for (const auto& nt : state)
    if (const auto it = host.find(nt.name); it != host.end()) nt.tensor.copy_from(it->second);
  model.refresh_compute_params();  // 16-bit compute copies follow the loaded masters
  return w;
}

}  // namespace dp
