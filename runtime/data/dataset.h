// defines: Dataset, the interface every data source implements, SampleKey (what a sample that
// depends on the epoch is keyed by), and the functions that open the in-memory ones: IDX /
// Fashion-MNIST (idx.cpp), CIFAR-10 (cifar10.cpp), synthetic (synthetic.cpp, and its token
// windows: synthetic_tokens.cpp), .npy arrays (npy.h). Image folders and tar shards:
// runtime/data/image_folder.h, tar_shards.h.
//
// A dataset is an indexable collection of (sample, label) pairs. Samples are float tensors of a
// fixed `sample_shape()` (e.g. (C, H, W) = (1, 28, 28)) with raw pixels scaled to [0, 1];
// normalisation and augmentation belong to the loader (runtime/data/transform.h).
//
// A dataset of bytes (holds_bytes(): IDX, CIFAR-10, u8 arrays, images) also hands out a sample as
// its bytes (get_u8), so that the GPU path uploads a quarter of the floats' size. An image
// sample is made on demand (decoded, cropped, resized to (3, S, S)), and its random crop depends
// on the epoch: get_u8 takes the crop to apply and the keys of its random draws.
//
// A data set of token windows (holds_tokens(): llm.c's token shards, token_dataset.h; synthetic
// token windows, make_synthetic_tokens) hands out a sample as its window of T + 1 uint16 tokens
// (get_tokens): the model's input is the first T, the targets (one label per position) the last
// T. sample_shape() is {T}, num_classes() the vocabulary.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/image/sample.h"
#include "runtime/tensor.h"

namespace dp::data {

struct SampleKey {
  const image::ImageCrop* crop = nullptr;  // image data sets: the crop; null = the data set's own
  uint64_t seed = 0, epoch = 0;            // random draws: keyed_rng(seed, kStreamCrop, index, epoch)
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;  // e.g. {1, 28, 28} (C, H, W)
  virtual int num_classes() const = 0;
  // Writes shape_numel(sample_shape()) floats to `out` and returns the label in
  // [0, num_classes()). Thread-safe: const, reads only memory fixed at construction.
  virtual int32_t get(int64_t index, float* out) const = 0;
  // One line for logs: "Fashion-MNIST train: 60000 x [1, 28, 28], 10 classes (...)".
  virtual std::string describe() const = 0;

  // The class names in label order (image folders: the folder names); empty when the data set
  // has only numbers.
  virtual std::vector<std::string> class_names() const { return {}; }
  // Where sample `index` comes from, for messages and predictions: a file, shard:key, or "#index".
  virtual std::string sample_name(int64_t index) const { return std::string("#").append(std::to_string(index)); }
  // false: samples without labels (images to predict); get() then returns -1.
  virtual bool labeled() const { return true; }
  // Datasets of bytes: get_u8 writes sample_numel() bytes (get()'s values are bytes / 255) and
  // returns the label. Thread-safe. Others: holds_bytes() is false and get_u8 throws DpError.
  virtual bool holds_bytes() const { return false; }
  virtual int32_t get_u8(int64_t index, const SampleKey& key, uint8_t* out) const;
  // Data sets of token windows: get_tokens writes the window_tokens() = sample_numel() + 1 tokens
  // of window `index` and throws UserError naming the file and position for a token outside the
  // vocabulary. Thread-safe. Others: holds_tokens() is false and get_tokens throws DpError.
  virtual bool holds_tokens() const { return false; }
  virtual void get_tokens(int64_t index, uint16_t* out) const;
  int64_t window_tokens() const { return sample_numel() + 1; }

  int64_t sample_numel() const { return shape_numel(sample_shape()); }
};

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// MNIST-style IDX image + label files, plain or gzip (format: idx.h). Samples (1, rows, cols), or
// (C, rows, cols) for a colour file. num_classes > 0: labels must be below it (Fashion-MNIST: 10);
// 0: the class count is the largest label + 1. Every malformed input is a UserError naming the
// file and what was expected vs found.
std::unique_ptr<Dataset> open_idx(const std::string& images_path, const std::string& labels_path,
                                  int num_classes = 10);

// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz in `dir` (the un-gzipped names are accepted
// too). A missing file's message says how to install the package.
std::unique_ptr<Dataset> open_fashion_mnist(const std::string& dir, bool train);

// CIFAR-10, binary version (format: cifar10.h): `dir` holds data_batch_1..5.bin and
// test_batch.bin, or the tarball's cifar-10-batches-bin/ folder. Samples (3, 32, 32).
std::unique_ptr<Dataset> open_cifar10(const std::string& dir, bool train);

// The most values one sample of a data set read from a file may hold: 2^32 (16 GiB in f32). A
// file of n samples holds n x that many values, so only a header that says "no samples" can name a
// larger one, and then it is damaged; dptrain would fail later, planning the model's shapes.
inline constexpr int64_t kMaxSampleValues = int64_t{1} << 32;

// UserError naming `path` when one sample of `shape` (each dimension >= 0 and below 2^63) holds
// more than kMaxSampleValues values; the count is exact (no int64 product that could wrap).
void check_sample_values(const std::string& path, const Shape& shape);

// n samples of `sample_shape` computed on the fly from (seed, index): deterministic, no memory
// per sample, learnable (the label decides the mean of the inputs). See synthetic.cpp.
std::unique_ptr<Dataset> make_synthetic(int64_t n, Shape sample_shape, int num_classes, uint64_t seed);

// n token windows of block_size + 1 uniform random tokens below vocab_size, computed on the fly
// from (seed, index): a data set of token windows (sample_shape() {block_size}, num_classes() the
// vocabulary) as token shards are, for a model that takes tokens; nothing in it is learnable.
// UserError for n outside [0, 2^55), block_size < 1 or vocab_size outside 1..65536 (uint16 tokens).
// See synthetic_tokens.cpp.
std::unique_ptr<Dataset> make_synthetic_tokens(int64_t n, int64_t block_size, int64_t vocab_size, uint64_t seed);

}  // namespace dp::data
