#include "launch/datasets.h"

#include <filesystem>
#include <numeric>

namespace dp::launch {
namespace {
std::vector<int64_t> range(int64_t begin, int64_t count) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), begin);
  return v;
}
// <dir>/<stem>.gz when it exists, else <dir>/<stem> (whose absence open_idx reports).
std::string idx_file(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz";
  return std::filesystem::exists(gz) ? gz : dir + "/" + stem;
}
int64_t limited(int64_t n, int64_t limit) { return limit > 0 ? std::min(n, limit) : n; }

// One generator for both splits: the evaluation samples are the indices after the training ones,
// so they come from the same distribution but are never trained on.
Datasets synthetic(const DataConfig& cfg) {
  Shape shape(cfg.synthetic_shape.begin(), cfg.synthetic_shape.end());
  std::shared_ptr<const data::Dataset> ds = data::make_synthetic(
      cfg.synthetic_train + cfg.synthetic_eval, shape, static_cast<int>(cfg.synthetic_classes), 12345);
  return {{ds, range(0, limited(cfg.synthetic_train, cfg.train_limit))},
          {ds, range(cfg.synthetic_train, limited(cfg.synthetic_eval, cfg.eval_limit))}};
}

// The data set of data.dataset, opened: training files first (so theirs is the error a user sees
// when both are missing).
Datasets open_kind(const DataConfig& cfg) {
  std::shared_ptr<const data::Dataset> tr, ev;
  switch (cfg.dataset) {
    case data::DatasetKind::Synthetic: return synthetic(cfg);
    case data::DatasetKind::Cifar10:
      tr = data::open_cifar10(cfg.path, true);
      ev = data::open_cifar10(cfg.path, false);
      break;
    case data::DatasetKind::Idx:  // any MNIST-style IDX pair, plain or gzip
      tr = data::open_idx(idx_file(cfg.path, "train-images-idx3-ubyte"), idx_file(cfg.path, "train-labels-idx1-ubyte"));
      ev = data::open_idx(idx_file(cfg.path, "t10k-images-idx3-ubyte"), idx_file(cfg.path, "t10k-labels-idx1-ubyte"));
      break;
    case data::DatasetKind::FashionMnist:
      tr = data::open_fashion_mnist(cfg.path, true);
      ev = data::open_fashion_mnist(cfg.path, false);
      break;
  }
  DP_CHECK(tr && ev, "data set kind {} is not handled", static_cast<int>(cfg.dataset));
  Datasets d;
  d.train = {tr, range(0, limited(tr->size(), cfg.train_limit))};
  d.eval = {ev, range(0, limited(ev->size(), cfg.eval_limit))};
  return d;
}
}  // namespace

Datasets open_datasets(const DataConfig& cfg) {
  Datasets d = open_kind(cfg);
  const Shape s = d.train.dataset->sample_shape();
  if (!cfg.mean.empty() && static_cast<int64_t>(cfg.mean.size()) != s[0])
    DP_THROW_USER("data.mean and data.std have {} values but the {} data has {} channels; give one per channel",
                  cfg.mean.size(), enum_name(cfg.dataset), s[0]);
  return d;
}

data::Transform transform_of(const DataConfig& d, bool train) {
  data::Transform t;
  t.mean.assign(d.mean.begin(), d.mean.end());
  t.std.assign(d.std.begin(), d.std.end());
  if (train) {
    t.crop_padding = static_cast<int>(d.crop_padding);
    t.hflip = d.hflip;
  }
  return t;
}

}  // namespace dp::launch
