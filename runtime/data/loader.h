// defines: Batch and Loader, which turns a list of dataset indices (one rank's share from the
// sampler) into batches on `workers` background threads.
//
// The workers take the samples one by one, in order, and write each into its row of its batch;
// at most `prefetch` batches are in the making or waiting at any time (a bounded queue), so the
// dataset's reads, decoding, augmentation and normalisation overlap the consumer's training step:
//   worker:   claim the next sample -> get() / get_u8() -> apply_transform() -> its row
//             (blocks while `prefetch` batches are ahead of the consumer)
//   consumer: next() hands out the oldest batch once all its rows are done (blocks until then)
// A row depends only on (seed, epoch, index), so batches are the same bytes for any number of
// workers. Exceptions in a worker never escape it: they are handed over and rethrown from next()
// after the batches made before them. Destruction mid-epoch stops the workers and joins them.
//
// For the GPU input pipeline (launch/device_input.h) the loader can hand out raw samples
// instead (BatchFormat::RawF32 / RawU8): the dataset's values without the transform, which the
// device applies; indices and labels are the same as in the transformed batches.
//
// A data set of token windows (Dataset::holds_tokens) is loaded as BatchFormat::Tokens (the model's
// i32 inputs and per-position i32 targets) or, for the GPU, RawTokens (the windows' bytes as stored:
// T + 1 little-endian uint16 tokens per sample, widened on the device); its transform must be the
// identity.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/transform.h"
#include "runtime/tensor.h"

namespace dp::data {

struct Batch {
  Tensor x;                      // f32 (B, C, H, W) on cpu (B, *sample_shape in general); u8 for RawU8;
                                 // Tokens: i32 (B, T) inputs; RawTokens: u8 (B, 2 (T + 1)), the
                                 // windows' bytes (T + 1 uint16 tokens each, as the shard stores them)
  Tensor y;                      // i32 (B); Tokens: i32 (B, T) targets; RawTokens: undefined
  std::vector<int64_t> indices;  // (B) dataset indices of the rows
};

// What a loader puts in Batch::x.
enum class BatchFormat : uint8_t {
  Transformed,  // f32, the transform applied: the CPU path
  RawF32,       // f32, the dataset's get() values untransformed: the device applies the transform
  RawU8,        // u8, the dataset's bytes untransformed (holds_bytes() only; images cropped by the
                // transform's crop): a quarter of RawF32's bytes to copy and upload; the device
                // scales them as get() does, float(b) / 255
  Tokens,       // token windows (holds_tokens() only): x i32 (B, T) inputs, y i32 (B, T) targets
  RawTokens,    // token windows as stored: x u8 (B, 2 (T + 1)) bytes of uint16 tokens, no y (the device
                // widens and splits them)
};

// RawTokens for token windows; RawU8 when `ds` keeps its samples as bytes (holds_bytes(): IDX,
// CIFAR-10, u8 arrays, images); else RawF32.
BatchFormat raw_format_of(const Dataset& ds);
// The CPU path's batches: Tokens for token windows, else Transformed.
BatchFormat host_format_of(const Dataset& ds);

// The batches a loader keeps allocated at once (those in the making and those waiting for next()):
// its prefetch, raised to its workers so that each has a batch. Pure.
int loader_depth(int prefetch, int workers);
// The bytes of one batch of `rows` samples of `sample_numel` values in `format` (Batch::x and
// Batch::y as Loader allocates them), for the memory plan (launch/memory_estimate.h). Pure.
size_t batch_bytes(BatchFormat format, int64_t sample_numel, int64_t rows);

class Loader {
 public:
  // `ds` must outlive the loader. Batch k holds indices[k*batch_size, (k+1)*batch_size); the
  // last, shorter batch is kept unless drop_last. Augmentation is keyed by (seed, epoch,
  // dataset index). Throws UserError for an index outside the dataset or a transform that does
  // not fit its samples. `format` other than Transformed: raw batches (the transform is still
  // checked, since the device will apply it); RawU8 needs a data set of bytes (else UserError);
  // Tokens and RawTokens need token windows and an identity transform, and token windows need
  // one of them (else UserError).
  // workers >= 1 threads (prefetch is raised to at least workers: loader_depth). The batches are
  // charged to MemoryCategory::Input (runtime/memory_account.h), wherever they go afterwards.
  Loader(const Dataset& ds, std::vector<int64_t> indices, int batch_size, bool drop_last, Transform t,
         uint64_t seed, uint64_t epoch, int prefetch = 3, BatchFormat format = BatchFormat::Transformed,
         int workers = 1);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, in order; false after the last. Rethrows an error of the loader thread.
  bool next(Batch& out);
  int64_t num_batches() const { return num_batches_; }
  // Blocks until the workers have allocated every batch they hold ahead of next() (the prefetch, or
  // what is left of the epoch): the loader's steady state, which the memory report measures.
  void wait_ahead_allocated();
  // Seconds next() spent waiting for the workers: the data-loading stall, for metrics.
  double wait_seconds() const { return wait_seconds_; }
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  // A batch in the making: its tensors (allocated by the worker that claims its first row) and
  // how many rows are done.
  struct Slot {
    Batch batch;
    int64_t rows = 0, done = 0;
    bool allocated = false;
    std::exception_ptr error;  // the first failed row's
  };
  // Per-worker buffers.
  struct Scratch {
    std::vector<float> f;
    std::vector<uint8_t> u8;
    std::vector<uint16_t> tokens;  // one window
  };
  void work();
  Batch allocate(int64_t b) const;
  void make_row(const Batch& batch, int64_t row, Scratch& s) const;
  void check_format() const;
  bool tokens() const { return format_ == BatchFormat::Tokens || format_ == BatchFormat::RawTokens; }

  const Dataset& ds_;
  const std::vector<int64_t> indices_;
  const int batch_size_;
  const Transform transform_;
  const uint64_t seed_, epoch_;
  const size_t prefetch_;
  const Shape sample_shape_;
  const BatchFormat format_;
  int64_t num_batches_ = 0, total_rows_ = 0;
  double wait_seconds_ = 0.0;

  std::mutex mu_;
  std::condition_variable ready_, room_, allocated_;
  std::map<int64_t, Slot> slots_;    // guarded by mu_: batch number -> slot (stable addresses)
  int64_t next_row_ = 0;             // guarded by mu_: the next row (position in indices_) to claim
  int64_t consumed_ = 0;             // guarded by mu_: batches handed out
  bool stop_ = false;                // guarded by mu_: set by the destructor
  std::vector<std::thread> threads_; // last member: started when everything above is ready
};

}  // namespace dp::data
