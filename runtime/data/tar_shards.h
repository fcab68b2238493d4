// defines: open_tar_shards, WebDataset tar shards (a brace pattern, runtime/data/brace.h) as one
// ImageDataset: the shards' samples in shard order, then member order, each read by one pread at
// the offset the shard's index gives (runtime/data/tar_index.h), so the sampler's semantics hold
// exactly as for a folder.
//
// The index of a shard is built once and cached in `index_dir` (beside the run, not beside the
// data, which may be read-only); ranks opening the same shards start at different shards and
// use each other's finished indices, so N ranks index a new data set about N times faster.
// Samples without a label, or with a bad one, or without an image, are errors naming shard and
// key, unless skip_bad (then left out, counted in the log); `labeled` = false keeps samples
// without labels (prediction).
#pragma once
#include <memory>
#include <string>

#include "runtime/data/image_dataset.h"

namespace dp::data {

std::unique_ptr<ImageDataset> open_tar_shards(const std::string& pattern, const ImageOptions& options,
                                              const std::string& index_dir, bool labeled = true);

}  // namespace dp::data
