// defines: PredictInput, the samples `dptrain predict` reads, in input order, with the files they
// are reported under, and open_predict_input, which picks the reader for --input.
//
// Readers (one sample file may hold many samples; each prediction names its file and, when the
// file holds more than one, the sample's index in it):
//   a folder of images (every JPEG/PNG under it: folders in sorted order, each one's own files
//   sorted before its subfolders'; one File per image)
//   tar shards (a brace pattern or one .tar; one File per sample, named by shard and member key)
//   an IDX image file (MNIST's layout, magic 0x00000803: n x rows x cols bytes; plain or gzip)
//   a CIFAR-10 binary file (*.bin: 3073-byte records, the label byte ignored)
// Images go through the cfg's evaluation crop (data.resize + CenterCrop(data.image_size)).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/image_dataset.h"

namespace dp::launch {

struct PredictInput {
  std::shared_ptr<const data::Dataset> samples;  // in input order; labels are not used
  struct File {
    std::string path;
    int64_t first = 0;    // its first sample's index in `samples`
    int64_t samples = 1;  // consecutive samples of `samples`, in file order
  };
  std::vector<File> files;  // in input order, covering `samples` exactly (first = the sum before)
  std::string what;         // for the log: "IDX images <path>: 10000 x [1, 28, 28]"
};

// The reader for `path`, by what it is (a folder, a brace pattern or .tar, a file's contents).
// images: the cfg's image options (launch/datasets.h image_options); index_dir: where tar shard
// indices are cached. Throws UserError naming the path and the inputs predict reads.
PredictInput open_predict_input(const std::string& path, const data::ImageOptions& images = {},
                                const std::string& index_dir = "");

// Pure. Sample i's file and its index in it (-1 when the file holds one sample); a binary search.
struct SampleSource {
  const std::string* file;
  int64_t index;
};
SampleSource sample_source(const PredictInput& in, int64_t i);

}  // namespace dp::launch
