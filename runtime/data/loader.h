// defines: Batch and Loader, which turns a list of dataset indices (one rank's share from the
// sampler) into batches on one background thread.
//
// The thread assembles batches in order into a bounded queue of `prefetch` batches, so the
// dataset's reads, augmentation and normalisation overlap the consumer's training step:
//   producer: get() -> apply_transform() -> Batch -> queue (blocks while full)
//   consumer: next() pops (blocks while empty)
// Exceptions in the thread never escape it: they are handed over and rethrown from next()
// after the batches made before them. Destruction mid-epoch stops the thread and joins it.
//
// For the GPU input pipeline (launch/device_input.h) the loader can hand out raw samples
// instead (BatchFormat::RawF32 / RawU8): the dataset's values without the transform, which the
// device applies; indices and labels are the same as in the transformed batches.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/transform.h"
#include "runtime/tensor.h"

namespace dp::data {

class U8Dataset;

struct Batch {
  Tensor x;                      // f32 (B, C, H, W) on cpu (B, *sample_shape in general); u8 for RawU8
  Tensor y;                      // i32 (B)
  std::vector<int64_t> indices;  // (B) dataset indices of the rows
};

// What a loader puts in Batch::x.
enum class BatchFormat : uint8_t {
  Transformed,  // f32, the transform applied: the CPU path
  RawF32,       // f32, the dataset's get() values untransformed: the device applies the transform
  RawU8,        // u8, the dataset's bytes untransformed (a U8Dataset only): a quarter of RawF32's
                // bytes to copy and upload; the device scales them as get() does, float(b) / 255
};

// RawU8 when `ds` keeps its samples as bytes (a U8Dataset: IDX, CIFAR-10), else RawF32.
BatchFormat raw_format_of(const Dataset& ds);

class Loader {
 public:
  // `ds` must outlive the loader. Batch k holds indices[k*batch_size, (k+1)*batch_size); the
  // last, shorter batch is kept unless drop_last. Augmentation is keyed by (seed, epoch,
  // dataset index). Throws UserError for an index outside the dataset or a transform that does
  // not fit its samples. `format` other than Transformed: raw batches (the transform is still
  // checked, since the device will apply it); RawU8 needs a U8Dataset (else UserError).
  Loader(const Dataset& ds, std::vector<int64_t> indices, int batch_size, bool drop_last, Transform t,
         uint64_t seed, uint64_t epoch, int prefetch = 3, BatchFormat format = BatchFormat::Transformed);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, in order; false after the last. Rethrows an error of the loader thread.
  bool next(Batch& out);
  int64_t num_batches() const { return num_batches_; }
  // Seconds next() spent waiting for the thread: the data-loading stall, for metrics.
  double wait_seconds() const { return wait_seconds_; }

 private:
  void run();
  Batch make_batch(int64_t b, std::vector<float>& scratch) const;
  Batch make_raw_batch(int64_t b, std::vector<float>& scratch) const;

  const Dataset& ds_;
  const std::vector<int64_t> indices_;
  const int batch_size_;
  const Transform transform_;
  const uint64_t seed_, epoch_;
  const size_t prefetch_;
  const Shape sample_shape_;
  const BatchFormat format_;
  const U8Dataset* u8_ = nullptr;  // ds_ as a U8Dataset, for RawU8
  int64_t num_batches_ = 0;
  double wait_seconds_ = 0.0;

  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Batch> queue_;          // guarded by mu_
  bool done_ = false;                // guarded by mu_: the thread has finished (or failed)
  std::exception_ptr error_;         // guarded by mu_
  std::atomic<bool> stop_{false};    // set by the destructor
  std::thread thread_;               // last member: started when everything above is ready
};

}  // namespace dp::data
