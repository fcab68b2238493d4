// defines: open_datasets, DataConfig -> the training and evaluation splits (dataset + indices),
// and transform_of, DataConfig -> the loader's per-sample transform.
#pragma once
#include <memory>
#include <vector>

#include "runtime/config.h"
#include "runtime/data/dataset.h"
#include "runtime/data/transform.h"

namespace dp::launch {

struct DataSplit {
  std::shared_ptr<const data::Dataset> dataset;
  std::vector<int64_t> indices;  // the samples of this split, in dataset order
};

struct Datasets {
  DataSplit train, eval;
};

Datasets open_datasets(const DataConfig& cfg);

// Normalisation always; random crop and flip only for training (train = true).
data::Transform transform_of(const DataConfig& d, bool train);

}  // namespace dp::launch
