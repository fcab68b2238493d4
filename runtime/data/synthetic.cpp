// make_synthetic (declared in dataset.h): a deterministic, learnable dataset computed on the fly.
//
// Sample i of a seed is a pure function of (seed, i) — no memory per sample — drawn from
// keyed_rng(seed, kStreamData, i):
//   label  y = uniform integer in [0, num_classes)
//   pixel  x[j] = 0.6 * P[y][j] + 0.4 * u[j],   u[j] ~ U[0, 1)
// where P[c] (one per class, uniform in [0, 1), from stream id 2^55 + c) is a fixed pattern.
// Values lie in [0, 1) like scaled pixels; the class decides the mean (0.6 P[y] + 0.2), so a
// linear model (or nearest class mean) learns it. The arithmetic is kernels/synthetic_math.h's,
// which the GPU generator (kernels/cuda/synthetic.h, data.synthetic_device = "cuda") runs too;
// this file draws the stream in order with Rng, the GPU by position, and both give the same bits.
#include <vector>

#include "kernels/synthetic_math.h"
#include "runtime/data/dataset.h"
#include "runtime/data/keyed_rng.h"

namespace dp::data {
namespace {

constexpr uint64_t kPatternId = kernels::kSyntheticPatternId;  // stream ids of the class patterns

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t n, Shape shape, int num_classes, uint64_t seed)
      : n_(n), shape_(std::move(shape)), numel_(shape_numel(shape_)), num_classes_(num_classes), seed_(seed) {
    patterns_.resize(static_cast<size_t>(num_classes_) * numel_);  // (num_classes, numel)
    for (int c = 0; c < num_classes_; ++c) {
      Rng rng = keyed_rng(seed_, kStreamData, kPatternId + c);
      for (int64_t j = 0; j < numel_; ++j) patterns_[c * numel_ + j] = kernels::synthetic_uniform(rng.next_u32());
    }
  }

  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  int32_t get(int64_t index, float* out) const override {
    DP_CHECK(index >= 0 && index < n_, "sample index {} out of range [0, {}) in {}", index, n_, describe());
    Rng rng = keyed_rng(seed_, kStreamData, static_cast<uint64_t>(index));
    const int32_t label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_classes_)));
    const float* p = patterns_.data() + label * numel_;
    for (int64_t j = 0; j < numel_; ++j) out[j] = kernels::synthetic_pixel(p[j], kernels::synthetic_uniform(rng.next_u32()));
    return label;
  }

  std::string describe() const override {
    return fmt::format("synthetic (seed {}): {} x {}, {} classes", seed_, n_, shape_str(shape_), num_classes_);
  }

 private:
  int64_t n_;
  Shape shape_;
  int64_t numel_;
  int num_classes_;
  uint64_t seed_;
  std::vector<float> patterns_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic(int64_t n, Shape sample_shape, int num_classes, uint64_t seed) {
  DP_CHECK(n >= 0 && n < static_cast<int64_t>(kPatternId), "synthetic dataset size {} out of range", n);
  DP_CHECK(num_classes >= 1, "synthetic dataset needs at least 1 class, got {}", num_classes);
  DP_CHECK(!sample_shape.empty(), "synthetic dataset needs a non-empty sample shape");
  for (auto d : sample_shape) DP_CHECK(d > 0, "synthetic sample shape {} has a dimension <= 0", shape_str(sample_shape));
  return std::make_unique<SyntheticDataset>(n, std::move(sample_shape), num_classes, seed);
}

}  // namespace dp::data
