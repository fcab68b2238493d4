// defines: Dataset, the interface every data source implements, and the functions that open
// one: IDX / Fashion-MNIST (idx.cpp), CIFAR-10 (cifar10.cpp), synthetic (synthetic.cpp).
//
// A dataset is an indexable collection of (sample, label) pairs. Samples are float tensors of a
// fixed `sample_shape()` (e.g. (C, H, W) = (1, 28, 28)) with raw pixels scaled to [0, 1];
// normalisation and augmentation belong to the loader (runtime/data/transform.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/tensor.h"

namespace dp::data {

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

  int64_t sample_numel() const { return shape_numel(sample_shape()); }
};

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// MNIST-style IDX image + label files, plain or gzip (format: idx.h). Samples (1, rows, cols),
// 10 classes. Every malformed input is a UserError naming the file and what was expected vs
// found.
std::unique_ptr<Dataset> open_idx(const std::string& images_path, const std::string& labels_path);

// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz in `dir` (the un-gzipped names are accepted
// too). A missing file's message says how to install the package.
std::unique_ptr<Dataset> open_fashion_mnist(const std::string& dir, bool train);

// CIFAR-10, binary version (format: cifar10.h): `dir` holds data_batch_1..5.bin and
// test_batch.bin, or the tarball's cifar-10-batches-bin/ folder. Samples (3, 32, 32).
std::unique_ptr<Dataset> open_cifar10(const std::string& dir, bool train);

// n samples of `sample_shape` computed on the fly from (seed, index): deterministic, no memory
// per sample, learnable (the label decides the mean of the inputs). See synthetic.cpp.
std::unique_ptr<Dataset> make_synthetic(int64_t n, Shape sample_shape, int num_classes, uint64_t seed);

}  // namespace dp::data
