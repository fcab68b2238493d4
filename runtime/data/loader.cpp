#include "runtime/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/cpu/tokens.h"
#include "runtime/memory_account.h"

namespace dp::data {

BatchFormat raw_format_of(const Dataset& ds) {
  if (ds.holds_tokens()) return BatchFormat::RawTokens;
  return ds.holds_bytes() ? BatchFormat::RawU8 : BatchFormat::RawF32;
}

BatchFormat host_format_of(const Dataset& ds) {
  return ds.holds_tokens() ? BatchFormat::Tokens : BatchFormat::Transformed;
}

int loader_depth(int prefetch, int workers) { return std::max(prefetch, workers); }

size_t batch_bytes(BatchFormat format, int64_t sample_numel, int64_t rows) {
  const auto n = static_cast<size_t>(sample_numel), r = static_cast<size_t>(rows);
  switch (format) {
    case BatchFormat::Tokens: return 2 * r * n * sizeof(int32_t);           // x and y: i32 (rows, T)
    case BatchFormat::RawTokens: return r * (n + 1) * sizeof(uint16_t);     // x: T + 1 uint16 a row; no y
    case BatchFormat::RawU8: return r * n + r * sizeof(int32_t);            // x u8, y i32 (rows)
    case BatchFormat::Transformed:
    case BatchFormat::RawF32: break;
  }
  return r * n * sizeof(float) + r * sizeof(int32_t);                        // x f32, y i32 (rows)
}

Loader::Loader(const Dataset& ds, std::vector<int64_t> indices, int batch_size, bool drop_last, Transform t,
               uint64_t seed, uint64_t epoch, int prefetch, BatchFormat format, int workers)
    : ds_(ds),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      transform_(std::move(t)),
      seed_(seed),
      epoch_(epoch),
      prefetch_(static_cast<size_t>(loader_depth(prefetch, workers))),
      sample_shape_(ds.sample_shape()),
      format_(format) {
  if (batch_size < 1) DP_THROW_USER("batch size {} < 1", batch_size);
  if (prefetch < 1) DP_THROW_USER("loader prefetch {} < 1, expected at least one batch in flight", prefetch);
  if (workers < 1) DP_THROW_USER("loader workers {} < 1, expected at least one thread", workers);
  check_format();
  const int64_t n = static_cast<int64_t>(indices_.size()), size = ds_.size();
  for (int64_t i = 0; i < n; ++i)
    if (indices_[i] < 0 || indices_[i] >= size)
      DP_THROW_USER("loader index {} (position {}) is outside the dataset {}, expected 0..{}", indices_[i], i,
                    ds_.describe(), size - 1);
  num_batches_ = drop_last ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  total_rows_ = std::min<int64_t>(n, num_batches_ * batch_size_);
  const int threads = static_cast<int>(std::min<int64_t>(workers, std::max<int64_t>(total_rows_, 1)));
  for (int w = 0; w < threads; ++w) threads_.emplace_back([this] { work(); });
}

void Loader::check_format() const {
  if (tokens() != ds_.holds_tokens())
    DP_THROW_USER("{} {} token windows: load it with {} batches (data::host_format_of and raw_format_of pick the "
                  "right one)",
                  ds_.describe(), ds_.holds_tokens() ? "holds" : "does not hold",
                  ds_.holds_tokens() ? "Tokens or RawTokens" : "image or array");
  if (tokens()) {
    if (!transform_.is_identity() || transform_.crop)
      DP_THROW_USER("data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows ({}); "
                    "leave them out of the cfg",
                    ds_.describe());
    return;
  }
  check_transform(transform_, sample_shape_);
  if (format_ == BatchFormat::RawU8 && !ds_.holds_bytes())
    DP_THROW_USER("raw u8 batches need a dataset of bytes, and {} is not one; use raw f32 batches "
                  "(data::raw_format_of picks the right one)",
                  ds_.describe());
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // Notify under the lock so that no worker misses it between its check and its wait.
    room_.notify_all();
    allocated_.notify_all();
  }
  for (auto& t : threads_) t.join();
}

Batch Loader::allocate(int64_t b) const {
  const int64_t begin = b * batch_size_;
  const int64_t rows = std::min<int64_t>(batch_size_, static_cast<int64_t>(indices_.size()) - begin);
  Shape xs{rows};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  Batch out;
  if (format_ == BatchFormat::Tokens) {
    out.x = Tensor::zeros(xs, DType::I32);
    out.y = Tensor::zeros(xs, DType::I32);
  } else if (format_ == BatchFormat::RawTokens) {
    out.x = Tensor::zeros({rows, 2 * ds_.window_tokens()}, DType::U8);
  } else {
    out.x = Tensor::zeros(xs, format_ == BatchFormat::RawU8 ? DType::U8 : DType::F32);
    out.y = Tensor::zeros({rows}, DType::I32);
  }
  out.indices.assign(indices_.begin() + begin, indices_.begin() + begin + rows);
  return out;
}

// One row: the dataset's values (bytes for RawU8; get()'s floats for RawF32) or, for Transformed,
// the transform applied to them. A data set of bytes is read as bytes and scaled here exactly as
// its get() would (float(b) / 255), so either way gives the same floats.
void Loader::make_row(const Batch& batch, int64_t r, Scratch& s) const {
  const int64_t index = batch.indices[r], numel = shape_numel(sample_shape_);
  if (format_ == BatchFormat::RawTokens) {
    // The row's bytes hold uint16 tokens: the tensor's storage is aligned, and 2 (T + 1) bytes a row
    // keep every row 2-byte aligned.
    ds_.get_tokens(index, reinterpret_cast<uint16_t*>(batch.x.data<uint8_t>() + r * 2 * (numel + 1)));
    return;
  }
  if (format_ == BatchFormat::Tokens) {
    ds_.get_tokens(index, s.tokens.data());
    kernels::cpu::split_token_windows(s.tokens.data(), 1, numel, batch.x.data<int32_t>() + r * numel,
                                      batch.y.data<int32_t>() + r * numel);
    return;
  }
  const SampleKey key{transform_.crop ? &*transform_.crop : nullptr, seed_, epoch_};
  int32_t label = 0;
  if (format_ == BatchFormat::RawU8) {
    label = ds_.get_u8(index, key, batch.x.data<uint8_t>() + r * numel);
  } else if (format_ == BatchFormat::RawF32) {
    label = ds_.get(index, batch.x.data<float>() + r * numel);
  } else {
    const bool identity = transform_.is_identity();
    float* row = batch.x.data<float>() + r * numel;
    float* in = identity ? row : s.f.data();
    if (ds_.holds_bytes()) {
      label = ds_.get_u8(index, key, s.u8.data());
      for (int64_t j = 0; j < numel; ++j) in[j] = static_cast<float>(s.u8[j]) / 255.0f;
    } else {
      label = ds_.get(index, in);
    }
    if (!identity) apply_transform(transform_, sample_shape_, seed_, epoch_, index, in, row);
  }
  if (ds_.labeled())
    DP_CHECK(label >= 0 && label < ds_.num_classes(), "label {} of sample {} outside [0, {}) in {}", label, index,
             ds_.num_classes(), ds_.describe());
  batch.y.data<int32_t>()[r] = label;
}

void Loader::work() {
  MemoryScope input(MemoryCategory::Input);  // the batches this worker allocates
  const size_t numel = static_cast<size_t>(shape_numel(sample_shape_));
  Scratch scratch{std::vector<float>(tokens() ? 0 : numel), std::vector<uint8_t>(tokens() ? 0 : numel),
                  std::vector<uint16_t>(tokens() ? numel + 1 : 0)};
  for (;;) {
    int64_t pos = 0, b = 0;
    Slot* slot = nullptr;
    bool first = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      room_.wait(lock, [&] {
        return stop_ || next_row_ >= total_rows_ ||
               next_row_ / batch_size_ < consumed_ + static_cast<int64_t>(prefetch_);
      });
      if (stop_ || next_row_ >= total_rows_) return;
      pos = next_row_++;
      b = pos / batch_size_;
      first = pos % batch_size_ == 0;
      slot = &slots_[b];  // the first row of a batch is always claimed first: it creates the slot
      if (!first) {
        allocated_.wait(lock, [&] { return stop_ || slot->allocated; });
        if (stop_) return;
        if (!slot->batch.x.defined()) {  // its allocation failed: the error is the batch's
          if (++slot->done >= slot->rows) ready_.notify_all();
          continue;
        }
      }
    }
    std::exception_ptr error;
    try {
      if (first) {
        Batch fresh = allocate(b);
        std::lock_guard<std::mutex> lock(mu_);
        slot->rows = fresh.x.dim(0);
        slot->batch = std::move(fresh);
        slot->allocated = true;
        allocated_.notify_all();
      }
      make_row(slot->batch, pos - b * batch_size_, scratch);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (error && !slot->allocated) {  // the allocation failed: the other rows just count as done
      slot->allocated = true;
      slot->rows = std::min<int64_t>(batch_size_, static_cast<int64_t>(indices_.size()) - b * batch_size_);
      allocated_.notify_all();
    }
    if (error && !slot->error) slot->error = error;
    if (++slot->done >= slot->rows) ready_.notify_all();
  }
}

void Loader::wait_ahead_allocated() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t ahead = std::min<int64_t>(static_cast<int64_t>(prefetch_), num_batches_ - consumed_);
  allocated_.wait(lock, [&] {
    int64_t n = 0;
    for (const auto& [b, slot] : slots_) n += slot.allocated ? 1 : 0;
    return stop_ || n >= ahead;
  });
}

bool Loader::next(Batch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (consumed_ >= num_batches_) return false;
  auto done = [&] {
    auto it = slots_.find(consumed_);
    return it != slots_.end() && it->second.allocated && it->second.done >= it->second.rows;
  };
  if (!done()) {
    const auto t0 = std::chrono::steady_clock::now();
    ready_.wait(lock, done);
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  auto it = slots_.find(consumed_);
  if (it->second.error) std::rethrow_exception(it->second.error);
  out = std::move(it->second.batch);
  slots_.erase(it);
  ++consumed_;
  room_.notify_all();
  return true;
}

}  // namespace dp::data
