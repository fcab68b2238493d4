#include "launch/datasets.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "runtime/data/image_folder.h"
#include "runtime/data/npy.h"
#include "runtime/data/tar_shards.h"
#include "runtime/data/token_dataset.h"
#include "runtime/log.h"

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
bool is_images(data::DatasetKind k) { return k == data::DatasetKind::ImageFolder || k == data::DatasetKind::TarShards; }

// One generator for both splits: the evaluation samples are the indices after the training ones,
// so they come from the same distribution but are never trained on. Images, or token windows for
// a model that takes tokens.
Datasets synthetic(const DataConfig& cfg, const TokenWindows& tokens) {
  const SyntheticSpec s = synthetic_spec(cfg, tokens);
  const int64_t n = cfg.synthetic_train + cfg.synthetic_eval;
  std::shared_ptr<const data::Dataset> ds =
      s.tokens ? data::make_synthetic_tokens(n, s.block_size, s.vocab, s.seed)
               : data::make_synthetic(n, s.shape, static_cast<int>(s.classes), s.seed);
  return {{ds, range(0, limited(cfg.synthetic_train, cfg.train_limit))},
          {ds, range(cfg.synthetic_train, limited(cfg.synthetic_eval, cfg.eval_limit))}};
}

}  // namespace

SyntheticSpec synthetic_spec(const DataConfig& cfg, const TokenWindows& tokens) {
  SyntheticSpec s{Shape(cfg.synthetic_shape.begin(), cfg.synthetic_shape.end()), cfg.synthetic_classes, 12345};
  if (tokens.model_takes_tokens) s.tokens = true, s.block_size = tokens.block_size, s.vocab = tokens.vocab_size;
  return s;
}

namespace {

// <path>/train and <path>/val (or data.val_path), with the same classes.
void image_folders(const DataConfig& cfg, std::shared_ptr<const data::Dataset>& tr,
                   std::shared_ptr<const data::Dataset>& ev) {
  const std::string train_dir = cfg.path + "/train", val_dir = cfg.val_path.empty() ? cfg.path + "/val" : cfg.val_path;
  if (!std::filesystem::is_directory(train_dir))
    DP_THROW_USER("{}: no such folder; data.dataset = \"image_folder\" reads data.path = \"{}\" as train/<class>/<image> "
                  "and val/<class>/<image> (torchvision's ImageFolder layout)",
                  train_dir, cfg.path);
  tr = data::open_image_folder(train_dir, image_options(cfg));
  ev = data::open_image_folder(val_dir, image_options(cfg));
  data::check_same_classes(*tr, train_dir, *ev, val_dir);
}

// llm.c's token shards: data.path the training shards, data.val_path the evaluation shards, each
// split's windows in file order (evaluation: the first data.eval_limit of them).
void token_shards(const DataConfig& cfg, const TokenWindows& w, std::shared_ptr<const data::Dataset>& tr,
                  std::shared_ptr<const data::Dataset>& ev) {
  data::TokenShardsOptions o{w.block_size, w.vocab_size, "data.path"};
  tr = data::open_token_shards(cfg.path, o);
  o.key = "data.val_path";
  ev = data::open_token_shards(cfg.val_path, o);
}

// The data set of data.dataset, opened: training files first (so theirs is the error a user sees
// when both are missing).
Datasets open_kind(const DataConfig& cfg, const std::string& index_dir, const TokenWindows& tokens) {
  std::shared_ptr<const data::Dataset> tr, ev;
  switch (cfg.dataset) {
    case data::DatasetKind::Synthetic: return synthetic(cfg, tokens);
    case data::DatasetKind::Cifar10:
      tr = data::open_cifar10(cfg.path, true);
      ev = data::open_cifar10(cfg.path, false);
      break;
    case data::DatasetKind::Idx:  // any MNIST-style IDX pair, plain or gzip, any class count
      tr = data::open_idx(idx_file(cfg.path, "train-images-idx3-ubyte"), idx_file(cfg.path, "train-labels-idx1-ubyte"), 0);
      ev = data::open_idx(idx_file(cfg.path, "t10k-images-idx3-ubyte"), idx_file(cfg.path, "t10k-labels-idx1-ubyte"), 0);
      break;
    case data::DatasetKind::FashionMnist:
      tr = data::open_fashion_mnist(cfg.path, true);
      ev = data::open_fashion_mnist(cfg.path, false);
      break;
    case data::DatasetKind::ImageFolder: image_folders(cfg, tr, ev); break;
    case data::DatasetKind::TarShards:
      tr = data::open_tar_shards(cfg.path, image_options(cfg), index_dir);
      ev = data::open_tar_shards(cfg.val_path, image_options(cfg), index_dir);
      break;
    case data::DatasetKind::Npy:
      tr = data::open_npy(cfg.path + "/train_x.npy", cfg.path + "/train_y.npy");
      ev = data::open_npy(cfg.path + "/val_x.npy", cfg.path + "/val_y.npy");
      if (ev->sample_shape() != tr->sample_shape())
        DP_THROW_USER("{}/val_x.npy has samples of shape {} but train_x.npy {}; expected the same", cfg.path,
                      shape_str(ev->sample_shape()), shape_str(tr->sample_shape()));
      break;
    case data::DatasetKind::Tokens: token_shards(cfg, tokens, tr, ev); break;
  }
  DP_CHECK(tr && ev, "data set kind {} is not handled", static_cast<int>(cfg.dataset));
  Datasets d;
  d.train = {tr, range(0, limited(tr->size(), cfg.train_limit))};
  d.eval = {ev, range(0, limited(ev->size(), cfg.eval_limit))};
  return d;
}
}  // namespace

TokenWindows token_windows_of(const ModelConfig& m) { return {m.block_size, m.vocab_size, model_takes_tokens(m)}; }

Datasets open_datasets(const DataConfig& cfg, const std::string& index_dir, const TokenWindows& tokens) {
  Datasets d = open_kind(cfg, index_dir.empty() ? std::string("tar-index") : index_dir, tokens);
  const Shape s = d.train.dataset->sample_shape();
  if (d.tokens()) {
    if (!cfg.mean.empty() || cfg.crop_padding != 0 || cfg.hflip)
      DP_THROW_USER("data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows (data.dataset = "
                    "\"{}\"{}); leave them out of the cfg",
                    enum_name(cfg.dataset),
                    cfg.dataset == data::DatasetKind::Synthetic ? " for a model that takes tokens" : "");
    return d;
  }
  if (!cfg.mean.empty() && static_cast<int64_t>(cfg.mean.size()) != s[0])
    DP_THROW_USER("data.mean and data.std have {} values but the {} data has {} channels; give one per channel",
                  cfg.mean.size(), enum_name(cfg.dataset), s[0]);
  return d;
}

std::string tar_index_dir(const Config& cfg) {
  return cfg.data.index_dir.empty() ? cfg.run.dir + "/" + cfg.run.name + "/tar-index" : cfg.data.index_dir;
}

data::ImageOptions image_options(const DataConfig& d) {
  data::ImageOptions o;
  o.eval_crop.kind = data::image::ImageCrop::Kind::ResizeCenterCrop;
  o.eval_crop.size = static_cast<int>(d.image_size);
  o.eval_crop.resize = static_cast<int>(d.resize > 0 ? d.resize : (d.image_size * 8 + 3) / 7);
  o.eval_crop.decode_scaled = d.decode_scaled;
  o.skip_bad = d.skip_bad;
  return o;
}

data::Transform transform_of(const DataConfig& d, bool train) {
  data::Transform t;
  t.mean.assign(d.mean.begin(), d.mean.end());
  t.std.assign(d.std.begin(), d.std.end());
  if (train) {
    t.crop_padding = static_cast<int>(d.crop_padding);
    t.hflip = d.hflip;
  }
  if (is_images(d.dataset)) {
    data::image::ImageCrop c = image_options(d).eval_crop;
    if (train && d.random_resized_crop) {
      c.kind = data::image::ImageCrop::Kind::RandomResizedCrop;
      c.scale_lo = d.crop_scale.at(0), c.scale_hi = d.crop_scale.at(1);
      c.ratio_lo = d.crop_ratio.at(0), c.ratio_hi = d.crop_ratio.at(1);
    }
    t.crop = c;
  }
  return t;
}

std::vector<std::string> data_classes(const Datasets& ds) {
  if (ds.tokens()) return {};
  std::vector<std::string> names = ds.train.dataset->class_names();
  const int k = std::max(ds.train.dataset->num_classes(), ds.eval.dataset->num_classes());
  for (int c = static_cast<int>(names.size()); c < k; ++c) names.push_back(std::to_string(c));
  return names;
}

std::string classes_json(const std::vector<std::string>& classes) { return nlohmann::json(classes).dump(); }

int64_t resolve_num_classes(int64_t configured, int64_t data_classes) {
  if (configured == 0) return data_classes;
  if (configured < data_classes)
    DP_THROW_USER("model.num_classes = {} but the data has {} classes; set model.num_classes = {} (or leave it out: "
                  "it defaults to the data's class count)",
                  configured, data_classes, data_classes);
  if (configured > data_classes)
    log::get("train")->warn("model.num_classes = {} but the data has {} classes: outputs {}..{} never see a label",
                            configured, data_classes, data_classes, configured - 1);
  return configured;
}

int loader_workers(const DataConfig& d, int local_ranks) {
  if (d.workers > 0) return static_cast<int>(d.workers);
  if (!is_images(d.dataset)) return 1;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_ranks));
}

}  // namespace dp::launch
