// defines: open_datasets, DataConfig -> the training and evaluation splits (dataset + indices).
#pragma once
#include <memory>
#include <vector>

#include "runtime/config.h"
#include "runtime/data/dataset.h"

namespace dp::launch {

struct DataSplit {
  std::shared_ptr<const data::Dataset> dataset;
  std::vector<int64_t> indices;  // the samples of this split, in dataset order
};

struct Datasets {
  DataSplit train, eval;
};

Datasets open_datasets(const DataConfig& cfg);

}  // namespace dp::launch
