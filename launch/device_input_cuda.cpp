// DeviceInput, the GPU input pipeline (launch/device_input.h says how a batch moves through it).
#include "launch/device_input.h"

#include <cstring>

#include "kernels/cuda/augment.h"
#include "kernels/cuda/tokens.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"
#include "runtime/device_error.h"

namespace dp::launch {

namespace {

kernels::cuda::AugmentOut augment_out(DType t) {
  switch (t) {
    case DType::F32: return kernels::cuda::AugmentOut::F32;
    case DType::BF16: return kernels::cuda::AugmentOut::BF16;
    case DType::F16: return kernels::cuda::AugmentOut::F16;
    default: break;
  }
  DP_THROW_USER("the input pipeline makes f32, bf16 or f16 batches, not {}", dtype_name(t));
}

DType checked_raw(DType t) {
  if (t != DType::U8 && t != DType::F32)
    DP_THROW_USER("the input pipeline takes raw u8 or f32 samples, not {}", dtype_name(t));
  return t;
}

}  // namespace

struct DeviceInput::Slot {
  cuda::PinnedBuffer pinned;  // SlotLayout
  Tensor staging;             // u8 (layout.bytes) on the device: the copy of `pinned`
  Tensor x;                   // (max_batch, C, H, W) compute dtype on the device; tokens: i32 (max_batch, T)
  Tensor y;                   // i32 (max_batch): a view of staging at y_offset; tokens: i32 (max_batch, T)
  cuda::CudaEvent copied, ready, released;
  int64_t size = 0;
  std::vector<int64_t> indices;
};

DeviceInput::DeviceInput(cuda::ExecContext& gpu, const data::Transform& t, const Shape& sample_shape,
                         int64_t max_batch, DType compute, bool channels_last, uint64_t seed, DType raw_dtype,
                         int slots)
    : gpu_(gpu),
      t_(t),
      sample_shape_(sample_shape),
      max_batch_(max_batch),
      sample_numel_(shape_numel(sample_shape)),
      compute_(compute),
      raw_dtype_(checked_raw(raw_dtype)),
      seed_(seed),
      geo_(input_geometry(sample_shape, channels_last)),
      raw_row_capacity_(static_cast<size_t>(sample_numel_) * dtype_size(raw_dtype_)),
      layout_(slot_layout(max_batch, raw_row_capacity_)),
      ring_(slots) {
  data::check_transform(t_, sample_shape_);
  (void)augment_out(compute_);
  const Device dev = Device::cuda(gpu_.device());
  norm_ = data::normalisation_table(t_, dev);
  allocate_slots(slots);
}

DeviceInput::DeviceInput(cuda::ExecContext& gpu, int64_t block_size, int64_t max_batch, int slots)
    : gpu_(gpu),
      tokens_(true),
      t_(),
      sample_shape_{block_size},
      max_batch_(max_batch),
      sample_numel_(block_size),
      compute_(DType::I32),
      raw_dtype_(DType::U8),
      seed_(0),
      geo_(input_geometry(sample_shape_, false)),
      raw_row_capacity_(static_cast<size_t>(2 * (block_size + 1))),  // T + 1 uint16 tokens
      layout_(slot_layout(max_batch, raw_row_capacity_)),
      ring_(slots) {
  DP_CHECK(block_size >= 1, "input pipeline: token windows of block size {}", block_size);
  allocate_slots(slots);
}

// Tensor::zeros on a device is synchronous (allocated and zeroed before it returns), so the data
// stream may use these at once.
void DeviceInput::allocate_slots(int slots) {
  const Device dev = Device::cuda(gpu_.device());
  Shape xs{max_batch_};
  xs.insert(xs.end(), sample_shape_.begin(), sample_shape_.end());
  slots_.resize(static_cast<size_t>(slots));
  for (Slot& s : slots_) {
    s.pinned = cuda::PinnedBuffer(layout_.bytes);
    try {
      s.staging = Tensor::zeros({static_cast<int64_t>(layout_.bytes)}, DType::U8, dev);
      s.x = Tensor::zeros(xs, compute_, dev);
      if (tokens_) s.y = Tensor::zeros(xs, DType::I32, dev);
    } catch (DeviceOutOfMemory& e) {
      e.set_allocation(fmt::format("an input slot of the GPU input pipeline ({} samples)", max_batch_));
      throw;
    }
    if (!tokens_)
      s.y = Tensor::view_of(s.staging.storage(), s.staging.byte_offset() + layout_.y_offset, {max_batch_}, DType::I32);
    s.copied = cuda::CudaEvent(false);
    s.ready = cuda::CudaEvent(false);
    s.released = cuda::CudaEvent(false);
  }
}

DeviceInput::~DeviceInput() {
  cuda::log_if_failed(cudaStreamSynchronize(gpu_.data()), "cudaStreamSynchronize (the input pipeline's data stream)");
}

// The raw batch fits this pipeline: its rows and the bytes of one row.
void DeviceInput::check_raw(const data::Batch& raw, int64_t& rows, size_t& row_bytes) const {
  const Tensor& x = raw.x;
  DP_CHECK(x.defined() && x.device().is_cpu() && (x.dtype() == DType::U8 || x.dtype() == DType::F32),
           "input pipeline: raw batch x must be u8 or f32 on the cpu, got {}", x.defined() ? x.describe() : "nothing");
  rows = x.ndim() >= 1 ? x.dim(0) : 0;
  Shape want{rows};
  if (tokens_) want.push_back(static_cast<int64_t>(raw_row_capacity_));
  else want.insert(want.end(), sample_shape_.begin(), sample_shape_.end());
  DP_CHECK(x.shape() == want && (!tokens_ || x.dtype() == DType::U8),
           "input pipeline: raw batch x is {}, expected {} (samples {}{})", x.describe(), shape_str(want),
           shape_str(sample_shape_), tokens_ ? ": the bytes of T + 1 uint16 tokens per row" : "");
  DP_CHECK(rows >= 1 && rows <= max_batch_, "input pipeline: batch of {} rows, expected 1..{}", rows, max_batch_);
  row_bytes = tokens_ ? raw_row_capacity_ : static_cast<size_t>(sample_numel_) * dtype_size(x.dtype());
  DP_CHECK(row_bytes <= raw_row_capacity_,
           "input pipeline: raw {} samples do not fit slots made for raw {} (pass raw_dtype = f32)",
           dtype_name(x.dtype()), dtype_name(raw_dtype_));
  if (!tokens_)
    DP_CHECK(raw.y.defined() && raw.y.device().is_cpu() && raw.y.dtype() == DType::I32 && raw.y.shape() == Shape{rows},
             "input pipeline: raw batch y must be i32 [{}] on the cpu, got {}", rows,
             raw.y.defined() ? raw.y.describe() : "nothing");
  DP_CHECK(static_cast<int64_t>(raw.indices.size()) == rows, "input pipeline: {} indices for a batch of {} rows",
           raw.indices.size(), rows);
}

void DeviceInput::submit(const data::Batch& raw, uint64_t epoch) {
  int64_t rows = 0;
  size_t row_bytes = 0;
  check_raw(raw, rows, row_bytes);
  const SlotRing::Fill f = ring_.submit();
  Slot& s = slots_[static_cast<size_t>(f.slot)];
  const cudaStream_t data = gpu_.data();
  // The pinned slot is read by the copy of its previous batch until `copied` fires.
  if (f.wait_copy) s.copied.synchronize();
  auto* p = s.pinned.as<unsigned char>();
  if (!tokens_) {
    std::memcpy(p + layout_.y_offset, raw.y.data<int32_t>(), static_cast<size_t>(rows) * sizeof(int32_t));
    data::pack_augment_choices(t_, seed_, epoch, raw.indices.data(), rows,
                               reinterpret_cast<int32_t*>(p + layout_.choice_offset));
  }
  std::memcpy(p + layout_.raw_offset, raw.x.raw(), static_cast<size_t>(rows) * row_bytes);
  s.size = rows;
  s.indices = raw.indices;

  // The device slot (staging's y and x) is read by the compute stream until `released`.
  if (f.wait_release) CHECK_CUDA(cudaStreamWaitEvent(data, s.released.get(), 0));
  auto* staging = static_cast<unsigned char*>(s.staging.raw());
  CHECK_CUDA(cudaMemcpyAsync(staging, p, layout_.upload_bytes(rows, row_bytes), cudaMemcpyHostToDevice, data));
  s.copied.record(data);
  finish_on_device(s, raw, rows);
  s.ready.record(data);
}

void DeviceInput::finish_on_device(Slot& s, const data::Batch& raw, int64_t rows) {
  const cudaStream_t data = gpu_.data();
  auto* staging = static_cast<unsigned char*>(s.staging.raw());
  if (tokens_) {
    // raw_offset is 256-byte aligned, and every row 2 (T + 1) bytes: the tokens are 2-byte aligned.
    CHECK_CUDA(kernels::cuda::split_token_windows(reinterpret_cast<const uint16_t*>(staging + layout_.raw_offset), rows,
                                                  sample_numel_, s.x.data<int32_t>(), s.y.data<int32_t>(), data));
    return;
  }
  const kernels::cuda::AugmentDims dims{rows, geo_.channels, geo_.height, geo_.width};
  const float* mean = norm_.defined() ? norm_.data<float>() : nullptr;
  const float* stdv = norm_.defined() ? mean + geo_.channels : nullptr;
  CHECK_CUDA(kernels::cuda::augment_batch(
      s.x.raw(), augment_out(compute_), geo_.nhwc, staging + layout_.raw_offset,
      raw.x.dtype() == DType::U8 ? kernels::cuda::AugmentIn::U8 : kernels::cuda::AugmentIn::F32, dims,
      reinterpret_cast<const int32_t*>(staging + layout_.choice_offset), t_.crop_padding, mean, stdv, data));
}

DeviceInput::DeviceBatch DeviceInput::next() {
  const SlotRing::Handout h = ring_.next();
  const cudaStream_t compute = gpu_.compute();
  if (h.released >= 0) slots_[static_cast<size_t>(h.released)].released.record(compute);
  Slot& s = slots_[static_cast<size_t>(h.slot)];
  CHECK_CUDA(cudaStreamWaitEvent(compute, s.ready.get(), 0));
  DeviceBatch b;
  b.x = s.x.narrow0(0, s.size);
  b.y = s.y.narrow0(0, s.size);
  b.size = s.size;
  b.indices = s.indices;
  return b;
}

}  // namespace dp::launch
