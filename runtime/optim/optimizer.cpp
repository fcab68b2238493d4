#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/suggest.h"
#include "runtime/memory_account.h"

namespace dp::optim {

Optimizer::Optimizer(int64_t numel) : numel_(numel) {
  DP_CHECK(numel >= 0, "optimizer over {} parameters", numel);
}

void Optimizer::place(Device device, void* cuda_stream) {
  DP_CHECK(device.is_cpu() || cuda_stream != nullptr, "{} optimizer on {} needs a stream", name(), device.str());
  {
    MemoryScope scope(MemoryCategory::OptimizerState);
    move_state(device);
  }
  copy_ = Tensor();  // a copy on the old device is no longer this optimizer's to write
  device_ = device;
  stream_ = cuda_stream;
  skip_bounds_device_ = Tensor();
  if (device.is_cuda() && !skip_bounds_.empty()) {
    MemoryScope scope(MemoryCategory::OptimizerState);
    Tensor host = Tensor::zeros({static_cast<int64_t>(skip_bounds_.size())}, DType::I64);
    std::copy(skip_bounds_.begin(), skip_bounds_.end(), host.data<int64_t>());
    skip_bounds_device_ = Tensor::zeros(host.shape(), DType::I64, device);
    skip_bounds_device_.copy_from(host);
  }
}

void Optimizer::skip_decay(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  int64_t at = 0;
  for (const auto& [b, e] : spans) {
    DP_CHECK(b >= at && e > b && e <= numel_,
             "{} optimizer: decay skip [{}, {}) is not sorted, disjoint, non-empty and within the {} parameters", name(),
             b, e, numel_);
    at = e;
  }
  DP_CHECK(device_.is_cpu(), "{} optimizer: skip_decay after place() on {}", name(), device_.str());
  skip_spans_ = spans;
  skip_bounds_.clear();
  for (const auto& [b, e] : spans) skip_bounds_.push_back(b), skip_bounds_.push_back(e);
}

kernels::DecaySkips Optimizer::decay_skips() const {
  kernels::DecaySkips d;
  d.count = static_cast<int32_t>(skip_spans_.size());
  if (d.count == 0) return d;
  d.bounds = skip_bounds_device_.defined() ? static_cast<const int64_t*>(skip_bounds_device_.raw()) : skip_bounds_.data();
  return d;
}

void Optimizer::write_compute_copy(const Tensor& copy) {
  if (!copy.defined()) {
    copy_ = Tensor();
    return;
  }
  DP_CHECK(device_.is_cuda(), "{} optimizer on {}: a 16-bit compute copy is written only on a GPU", name(),
           device_.str());
  DP_CHECK((copy.dtype() == DType::BF16 || copy.dtype() == DType::F16) && copy.ndim() == 1 &&
               copy.numel() == numel_ && copy.device() == device_,
           "{} optimizer over {} parameters on {} was given the compute copy {}: want a flat bf16 or f16 tensor of "
           "that length on that device",
           name(), numel_, device_.str(), copy.describe());
  copy_ = copy;
}

namespace {
// skip spans [b, e) (sorted, disjoint) that meet [begin, begin + n), relative to begin and cut to it:
// the bounds a kernel running on those n elements takes.
std::vector<int64_t> spans_within(const std::vector<std::pair<int64_t, int64_t>>& spans, int64_t begin, int64_t n) {
  std::vector<int64_t> out;
  for (const auto& [b, e] : spans) {
    const int64_t lo = std::max(b, begin), hi = std::min(e, begin + n);
    if (lo < hi) out.push_back(lo - begin), out.push_back(hi - begin);
  }
  return out;
}
}  // namespace

void Optimizer::check_pieces(const Tensor& params, const Tensor& grads, const std::vector<ArenaPiece>& pieces,
                             double lr, const Tensor& copy16) const {
  DP_CHECK(params.defined() && grads.defined() && params.dtype() == DType::F32 && grads.dtype() == DType::F32 &&
               params.numel() == grads.numel() && params.device() == device_ && grads.device() == device_,
           "{} optimizer placed on {}: step_pieces wants the flat f32 parameter and gradient arenas there, got {} and "
           "{}",
           name(), device_.str(), params.defined() ? params.describe() : "an undefined tensor",
           grads.defined() ? grads.describe() : "an undefined tensor");
  DP_CHECK(!copy_.defined(), "{} optimizer on {}: step_pieces (train.zero > 0) writes the compute copy given to it, "
           "not write_compute_copy's", name(), device_.str());
  DP_CHECK(!copy16.defined() || (device_.is_cuda() && (copy16.dtype() == DType::BF16 || copy16.dtype() == DType::F16) &&
                                 copy16.ndim() == 1 && copy16.numel() == params.numel() && copy16.device() == device_),
           "{} optimizer on {}: step_pieces was given the compute copy {}: want a flat bf16 or f16 tensor of the "
           "arena's {} elements on this optimizer's GPU",
           name(), device_.str(), copy16.defined() ? copy16.describe() : "", params.numel());
  if (!std::isfinite(lr) || lr < 0)
    DP_THROW_USER("{} optimizer: invalid learning rate {} (want a finite value >= 0)", name(), lr);
  for (const ArenaPiece& pc : pieces)
    DP_CHECK(pc.len >= 0 && pc.arena_begin >= 0 && pc.arena_begin + pc.len <= params.numel() && pc.state_begin >= 0 &&
                 pc.state_begin + pc.len <= numel_,
             "{} optimizer: piece (arena {}, {} elements, state {}) is outside the arena of {} or the state of {}",
             name(), pc.arena_begin, pc.len, pc.state_begin, params.numel(), numel_);
}

std::vector<kernels::DecaySkips> Optimizer::piece_skips(const std::vector<ArenaPiece>& pieces) {
  std::vector<int64_t> bounds;
  std::vector<std::pair<size_t, int32_t>> at;  // per piece: its first bound, its spans
  for (const ArenaPiece& pc : pieces) {
    const std::vector<int64_t> mine = spans_within(skip_spans_, pc.state_begin, pc.len);
    at.emplace_back(bounds.size(), static_cast<int32_t>(mine.size() / 2));
    bounds.insert(bounds.end(), mine.begin(), mine.end());
  }
  if (device_.is_cuda() && !bounds.empty() && (bounds != piece_bounds_ || !piece_bounds_device_.defined())) {
    MemoryScope scope(MemoryCategory::OptimizerState);
    Tensor host = Tensor::zeros({static_cast<int64_t>(bounds.size())}, DType::I64);
    std::copy(bounds.begin(), bounds.end(), host.data<int64_t>());
    piece_bounds_device_ = Tensor::zeros(host.shape(), DType::I64, device_);
    piece_bounds_device_.copy_from(host);
  }
  piece_bounds_ = std::move(bounds);
  const int64_t* base = device_.is_cuda() && !piece_bounds_.empty()
                            ? static_cast<const int64_t*>(piece_bounds_device_.raw())
                            : piece_bounds_.data();
  std::vector<kernels::DecaySkips> out;
  for (const auto& [first, count] : at) out.push_back({count == 0 ? nullptr : base + first, count});
  return out;
}

void Optimizer::step_pieces(const Tensor& params, const Tensor& grads, const std::vector<ArenaPiece>& pieces,
                            double lr, const Tensor& copy16) {
  check_pieces(params, grads, pieces, lr, copy16);
  const std::vector<kernels::DecaySkips> skips = piece_skips(pieces);
  float* const p = static_cast<float*>(params.raw());
  const float* const g = static_cast<const float*>(grads.raw());
  auto* const c = copy16.defined() ? static_cast<uint16_t*>(copy16.raw()) : nullptr;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const ArenaPiece& pc = pieces[k];
    const Copy16 copy{c ? c + pc.arena_begin : nullptr, copy16.defined() && copy16.dtype() == DType::BF16};
    if (pc.len > 0) update_span(p + pc.arena_begin, g + pc.arena_begin, pc.state_begin, pc.len, lr, skips[k], copy);
  }
  ++steps_;
}

void Optimizer::restore_steps(int64_t steps) {
  if (steps < 0) DP_THROW_USER("{} optimizer: step count {} is negative", name(), steps);
  steps_ = steps;
}

void Optimizer::check_step_args(const Tensor& params, const Tensor& grads, double lr) const {
  for (const Tensor* t : {&params, &grads}) {
    const char* what = t == &params ? "parameters" : "gradients";
    DP_CHECK(t->defined(), "{} optimizer: {} tensor is undefined", name(), what);
    DP_CHECK(t->dtype() == DType::F32 && t->ndim() == 1 && t->numel() == numel_,
             "{} optimizer over {} parameters was given {} {}: want a flat f32 tensor of that length", name(),
             numel_, what, t->describe());
    DP_CHECK(t->device() == device_, "{} optimizer placed on {} was given {} {}", name(), device_.str(), what,
             t->describe());
  }
  if (!std::isfinite(lr) || lr < 0)
    DP_THROW_USER("{} optimizer: invalid learning rate {} (want a finite value >= 0)", name(), lr);
}

void Optimizer::load_slots(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps,
                           const std::vector<std::pair<std::string, Tensor>>& slots) {
  std::vector<std::string> expected, missing, unexpected, problems;
  std::set<std::string> given;
  for (const auto& [n, t] : slots) expected.push_back(n);
  for (const auto& [n, t] : state) {
    if (!given.insert(n).second) problems.push_back(fmt::format("'{}' given twice", n));
    bool known = false;
    for (const auto& e : expected) known = known || e == n;
    if (!known) unexpected.push_back("'" + n + "'");
  }
  for (const auto& e : expected)
    if (!given.count(e)) missing.push_back("'" + e + "'");
  if (!missing.empty()) problems.push_back("missing " + join(missing));
  if (!unexpected.empty()) problems.push_back("unexpected " + join(unexpected));
  for (const auto& [n, t] : state) {
    if (!t.defined()) problems.push_back(fmt::format("'{}' is undefined", n));
    else if (t.dtype() != DType::F32 || t.numel() != numel_)
      problems.push_back(fmt::format("'{}' is {}, want f32 with {} elements", n, t.describe(), numel_));
  }
  if (steps < 0) problems.push_back(fmt::format("step count {} is negative", steps));
  if (!problems.empty())
    DP_THROW_USER("cannot load {} optimizer state ({} parameters, slots: {}): {}", name(), numel_,
                  expected.empty() ? std::string("none") : join(expected), join(problems, "; "));
  // Everything checked: now copy, so a failed load leaves the optimizer as it was.
  for (const auto& [n, dst] : slots)
    for (const auto& [m, src] : state)
      if (m == n) dst.copy_from(src.reshape(dst.shape()));
  steps_ = steps;
}

}  // namespace dp::optim
