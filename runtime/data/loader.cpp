#include "runtime/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/data/u8_dataset.h"

namespace dp::data {

BatchFormat raw_format_of(const Dataset& ds) {
  return dynamic_cast<const U8Dataset*>(&ds) != nullptr ? BatchFormat::RawU8 : BatchFormat::RawF32;
}

Loader::Loader(const Dataset& ds, std::vector<int64_t> indices, int batch_size, bool drop_last, Transform t,
               uint64_t seed, uint64_t epoch, int prefetch, BatchFormat format)
    : ds_(ds),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      transform_(std::move(t)),
      seed_(seed),
      epoch_(epoch),
      prefetch_(static_cast<size_t>(prefetch)),
      sample_shape_(ds.sample_shape()),
      format_(format) {
  if (batch_size < 1) DP_THROW_USER("batch size {} < 1", batch_size);
  if (prefetch < 1) DP_THROW_USER("loader prefetch {} < 1, expected at least one batch in flight", prefetch);
  check_transform(transform_, sample_shape_);
  if (format_ == BatchFormat::RawU8) {
    u8_ = dynamic_cast<const U8Dataset*>(&ds_);
    if (u8_ == nullptr)
      DP_THROW_USER("raw u8 batches need a dataset of bytes, and {} is not one; use raw f32 batches "
                    "(data::raw_format_of picks the right one)",
                    ds_.describe());
  }
  const int64_t n = static_cast<int64_t>(indices_.size()), size = ds_.size();
  for (int64_t i = 0; i < n; ++i)
    if (indices_[i] < 0 || indices_[i] >= size)
      DP_THROW_USER("loader index {} (position {}) is outside the dataset {}, expected 0..{}", indices_[i], i,
                    ds_.describe(), size - 1);
  num_batches_ = drop_last ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  thread_ = std::thread([this] { run(); });
}

Loader::~Loader() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Notify under the lock so the producer cannot miss it between its check and its wait.
    not_full_.notify_all();
  }
  thread_.join();
}

Batch Loader::make_batch(int64_t b, std::vector<float>& scratch) const {
  if (format_ != BatchFormat::Transformed) return make_raw_batch(b, scratch);
  const int64_t begin = b * batch_size_;
  const int64_t rows = std::min<int64_t>(batch_size_, static_cast<int64_t>(indices_.size()) - begin);
  const int64_t numel = shape_numel(sample_shape_);
  Shape xs{rows};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  Batch out;
  out.x = Tensor::zeros(xs, DType::F32);
  out.y = Tensor::zeros({rows}, DType::I32);
  out.indices.assign(indices_.begin() + begin, indices_.begin() + begin + rows);
  float* x = out.x.data<float>();
  int32_t* y = out.y.data<int32_t>();
  const bool identity = transform_.is_identity();
  for (int64_t r = 0; r < rows && !stop_; ++r) {
    const int64_t index = out.indices[r];
    float* row = x + r * numel;
    const int32_t label = ds_.get(index, identity ? row : scratch.data());
    DP_CHECK(label >= 0 && label < ds_.num_classes(), "label {} of sample {} outside [0, {}) in {}", label, index,
             ds_.num_classes(), ds_.describe());
    y[r] = label;
    if (!identity) apply_transform(transform_, sample_shape_, seed_, epoch_, index, scratch.data(), row);
  }
  return out;
}

// The rows as the dataset holds them: get()'s floats (RawF32) or the bytes (RawU8). The label
// of a U8Dataset sample comes from get() too (its only label accessor), into the scratch row.
Batch Loader::make_raw_batch(int64_t b, std::vector<float>& scratch) const {
  const int64_t begin = b * batch_size_;
  const int64_t rows = std::min<int64_t>(batch_size_, static_cast<int64_t>(indices_.size()) - begin);
  const int64_t numel = shape_numel(sample_shape_);
  const bool u8 = format_ == BatchFormat::RawU8;
  Shape xs{rows};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  Batch out;
  out.x = Tensor::zeros(xs, u8 ? DType::U8 : DType::F32);
  out.y = Tensor::zeros({rows}, DType::I32);
  out.indices.assign(indices_.begin() + begin, indices_.begin() + begin + rows);
  int32_t* y = out.y.data<int32_t>();
  for (int64_t r = 0; r < rows && !stop_; ++r) {
    const int64_t index = out.indices[r];
    const int32_t label = ds_.get(index, u8 ? scratch.data() : out.x.data<float>() + r * numel);
    DP_CHECK(label >= 0 && label < ds_.num_classes(), "label {} of sample {} outside [0, {}) in {}", label, index,
             ds_.num_classes(), ds_.describe());
    y[r] = label;
    if (u8) std::memcpy(out.x.data<uint8_t>() + r * numel, u8_->raw(index), static_cast<size_t>(numel));
  }
  return out;
}

void Loader::run() {
  try {
    std::vector<float> scratch(static_cast<size_t>(shape_numel(sample_shape_)));
    for (int64_t b = 0; b < num_batches_ && !stop_; ++b) {
      Batch batch = make_batch(b, scratch);
      std::unique_lock<std::mutex> lock(mu_);
      not_full_.wait(lock, [&] { return queue_.size() < prefetch_ || stop_; });
      if (stop_) break;
      queue_.push_back(std::move(batch));
      not_empty_.notify_one();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  not_empty_.notify_all();
}

bool Loader::next(Batch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty() && !done_) {
    const auto t0 = std::chrono::steady_clock::now();
    not_empty_.wait(lock, [&] { return !queue_.empty() || done_; });
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!queue_.empty()) {
    out = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

}  // namespace dp::data
