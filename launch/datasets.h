// defines: open_datasets, DataConfig -> the training and evaluation splits (dataset + indices);
// transform_of, DataConfig -> the loader's per-sample transform; and what else the run derives
// from the data: the class count and names (data_classes, classes_json), the model's class count
// (resolve_num_classes), the loader's thread count (loader_workers), the tar index folder
// (tar_index_dir), and image_options (for a caller that opens images itself, e.g. prediction).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/config.h"
#include "runtime/data/dataset.h"
#include "runtime/data/image_dataset.h"
#include "runtime/data/transform.h"

namespace dp::launch {

struct DataSplit {
  std::shared_ptr<const data::Dataset> dataset;
  std::vector<int64_t> indices;  // the samples of this split, in dataset order
};

struct Datasets {
  DataSplit train, eval;
  bool tokens() const { return train.dataset && train.dataset->holds_tokens(); }
};

// What token windows take from the model: its context T (model.block_size) and vocabulary
// (model.vocab_size), and whether it takes tokens at all (model_takes_tokens: the gpt2 preset),
// which makes data.dataset = "synthetic" token windows instead of images. Unused by the other
// data set kinds.
struct TokenWindows {
  int64_t block_size = 0, vocab_size = 0;
  bool model_takes_tokens = false;
};
TokenWindows token_windows_of(const ModelConfig& m);

// index_dir: where tar shard indices are cached (tar_index_dir(cfg)); unused by other kinds.
// tokens: token_windows_of(cfg.model), for data.dataset = "tokens" and "synthetic" (the default:
// a model that takes images).
Datasets open_datasets(const DataConfig& cfg, const std::string& index_dir = "", const TokenWindows& tokens = {});

// The generator of data.dataset = "synthetic" (data::make_synthetic's or make_synthetic_tokens'
// arguments but the size): what the GPU generator (data.synthetic_device = "cuda",
// launch/synthetic_input.h) needs to make the same samples as open_datasets' data set.
struct SyntheticSpec {
  Shape shape;          // per sample (images)
  int64_t classes = 0;  // images
  uint64_t seed = 0;    // the data set's own seed (not run.seed)
  // Token windows (tokens: for a model that takes tokens): block_size + 1 tokens below vocab per
  // sample; shape and classes are then unused.
  bool tokens = false;
  int64_t block_size = 0, vocab = 0;
};
SyntheticSpec synthetic_spec(const DataConfig& cfg, const TokenWindows& tokens = {});

// data.index_dir, or <run.dir>/<run.name>/tar-index.
std::string tar_index_dir(const Config& cfg);

// The image data sets' options: the evaluation crop (Resize(resize) + CenterCrop(image_size)),
// reduced decoding, skip_bad.
data::ImageOptions image_options(const DataConfig& d);

// Normalisation always; random crop and flip only for training (train = true); for image data
// sets the crop that makes each sample (training: RandomResizedCrop unless turned off).
data::Transform transform_of(const DataConfig& d, bool train);

// The classes of the data: the larger count of the two splits, and their names (the training
// set's, or "0", "1", ... when it has none).
std::vector<std::string> data_classes(const Datasets& ds);
// The names as a JSON list, for <run>/classes.json and the checkpoints' "classes".
std::string classes_json(const std::vector<std::string>& classes);

// model.num_classes resolved against the data's count K: 0 -> K; fewer than K is a UserError
// saying what to set; more than K is kept (outputs that never see a label) with a warning.
int64_t resolve_num_classes(int64_t configured, int64_t data_classes);

// data.workers resolved: 0 -> the rank's share of the cores (cores / ranks on this node, at
// least 1) for image data sets, 1 for the in-memory ones.
int loader_workers(const DataConfig& d, int local_ranks);

}  // namespace dp::launch
