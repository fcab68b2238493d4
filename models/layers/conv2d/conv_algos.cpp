#include "models/layers/conv2d/conv_algos.h"

#include <fmt/format.h>

#include "base/alignment.h"
#include "base/error.h"
#include "base/hash.h"

namespace dp::cuda {

const char* conv_pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward-data";
    case ConvPass::BackwardFilter: return "backward-filter";
  }
  return "?";
}

std::string ConvKey::str() const {
  return fmt::format("{} {} x[{}, {}, {}, {}] w[{}, {}, {}, {}] pad {} stride {} groups {} {} math{}", dtype_name(dtype),
                     channels_last ? "NHWC" : "NCHW", n, c, h, w, k, groups > 0 ? c / groups : c, r, s, pad, stride,
                     groups, tensor_ops ? "tensor-op" : tf32 ? "TF32" : "FMA",
                     align < 256 ? fmt::format(", filter {}-byte aligned", align) : "");
}

int64_t pointer_alignment(std::initializer_list<const void*> ptrs) { return address_alignment(ptrs, 256); }

namespace {
// Folds v into h through splitmix64's finaliser (Steele et al., OOPSLA'14): unlike
// boost::hash_combine over the identity std::hash, keys that differ by small numbers in one
// field (stride 1 vs 2, pad 1 vs 2) do not collide.
void mix(size_t& h, uint64_t v) { hash_combine(h, v); }
}  // namespace

size_t ConvKeyHash::operator()(const ConvKey& k) const noexcept {
  size_t h = 0;
  mix(h, static_cast<uint64_t>(k.dtype));
  mix(h, (k.channels_last ? 1u : 0u) | (k.tensor_ops ? 2u : 0u) | (k.tf32 ? 4u : 0u));
  for (int64_t v : {k.n, k.c, k.h, k.w, k.k, k.r, k.s, k.pad, k.stride, k.groups, k.align})
    mix(h, static_cast<uint64_t>(v));
  return h;
}

int conv_math_type(const ConvKey& key) {
  if (key.dtype == DType::F16) return kCudnnTensorOpMath;
  if (key.dtype == DType::BF16) return kCudnnDefaultMath;
  return key.tf32 ? kCudnnDefaultMath : kCudnnFmaMath;
}

bool conv_needs_fma_math(const ConvKey& key) { return key.dtype == DType::F32 && !key.tensor_ops && !key.tf32; }

std::optional<AlgoPerf> choose_algo(const std::vector<AlgoPerf>& results, size_t workspace_limit, bool fma_only) {
  std::optional<AlgoPerf> best;
  for (const AlgoPerf& r : results) {
    if (r.status != kCudnnStatusSuccess || r.memory > workspace_limit) continue;
    if (fma_only && r.math != kCudnnFmaMath) continue;
    if (r.math == kCudnnTensorOpMathAllowConversion) continue;
    if (!best || r.time_ms < best->time_ms) best = r;
  }
  return best;
}

std::string describe_candidates(const std::vector<AlgoPerf>& results) {
  if (results.empty()) return "cuDNN returned no candidates";
  std::string out;
  for (const AlgoPerf& r : results) {
    if (!out.empty()) out += ", ";
    if (r.status != kCudnnStatusSuccess)
      out += fmt::format("algo {} (cuDNN status {})", r.algo, r.status);
    else
      out += fmt::format("algo {} ({:.3g} ms, {:.1f} MiB, math {})", r.algo, r.time_ms,
                         static_cast<double>(r.memory) / (1 << 20), r.math);
  }
  return out;
}

size_t ConvAlgoCache::PassKeyHash::operator()(const PassKey& k) const noexcept {
  size_t h = ConvKeyHash{}(k.key);
  mix(h, static_cast<uint64_t>(k.pass));
  return h;
}

AlgoPerf ConvAlgoCache::get(ConvPass pass, const ConvKey& key, size_t workspace_limit, const std::string& who,
                            const Find& find) {
  std::lock_guard<std::mutex> lock(mu_);
  const PassKey pk{pass, key};
  if (auto it = chosen_.find(pk); it != chosen_.end() && it->second.memory <= workspace_limit) return it->second;
  const std::vector<AlgoPerf> results = find();
  const bool fma_only = conv_needs_fma_math(key);
  const std::optional<AlgoPerf> best = choose_algo(results, workspace_limit, fma_only);
  if (!best)
    throw DpError(fmt::format(
        "{}: no cuDNN {} algorithm for {} runs{} within the workspace limit of {} bytes ({:.1f} MiB) [{}]; "
        "candidates: {}; give the GPU context a larger workspace limit",
        who, conv_pass_name(pass), key.str(), fma_only ? " in FMA math" : "", workspace_limit,
        static_cast<double>(workspace_limit) / (1 << 20), identity_string(), describe_candidates(results)));
  chosen_[pk] = *best;
  return *best;
}

size_t ConvAlgoCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chosen_.size();
}

ConvAlgoCache& ConvAlgoCache::global() {
  static ConvAlgoCache cache;
  return cache;
}

}  // namespace dp::cuda
