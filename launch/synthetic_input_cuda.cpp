// SyntheticInput, synthetic training batches made on the GPU (launch/synthetic_input.h): images or
// token windows.
#include "launch/synthetic_input.h"

#include <cstring>

#include "kernels/cuda/synthetic.h"
#include "kernels/synthetic_math.h"
#include "launch/device_input.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::launch {

namespace {

kernels::cuda::AugmentOut out_type(DType t) {
  switch (t) {
    case DType::F32: return kernels::cuda::AugmentOut::F32;
    case DType::BF16: return kernels::cuda::AugmentOut::BF16;
    case DType::F16: return kernels::cuda::AugmentOut::F16;
    default: break;
  }
  DP_THROW_USER("synthetic batches on the GPU are f32, bf16 or f16, not {}", dtype_name(t));
}

}  // namespace

struct SyntheticInput::Impl {
  cuda::ExecContext& gpu;
  SyntheticSpec spec;
  int64_t max_batch;
  DType compute;
  InputGeometry geo;  // images
  Tensor x;      // (max_batch, *sample) compute dtype; token windows: i32 (max_batch, T) inputs
  Tensor y;      // i32 (max_batch); token windows: i32 (max_batch, T) targets
  Tensor words;  // u32 as i32 (max_batch): where each row's noise starts in its stream
  Tensor norm;   // f32 (2, C): mean, std; undefined without normalisation
  Tensor order;  // i64 (epoch samples)
  std::vector<int64_t> host_order;

  void allocate_images(const data::Transform& t);
  void allocate_tokens(const data::Transform& t);
  Batch make_images(int64_t first, int64_t rows);
  Batch make_tokens(int64_t first, int64_t rows);
};

// Images: x (max_batch, *sample) in the compute dtype, labels, where each row's noise starts, and
// the normalisation.
void SyntheticInput::Impl::allocate_images(const data::Transform& t) {
  data::check_transform(t, spec.shape);
  if (t.crop_padding != 0 || t.hflip)
    DP_THROW_USER("data.synthetic_device = \"cuda\" makes batches without augmentation: set data.crop_padding = 0 and "
                  "data.hflip = false, or data.synthetic_device = \"cpu\"");
  DP_CHECK(spec.classes >= 1, "synthetic input: {} classes", spec.classes);
  (void)out_type(compute);
  const Device dev = Device::cuda(gpu.device());
  Shape xs{max_batch};
  xs.insert(xs.end(), spec.shape.begin(), spec.shape.end());
  x = Tensor::zeros(xs, compute, dev);
  y = Tensor::zeros({max_batch}, DType::I32, dev);
  words = Tensor::zeros({max_batch}, DType::I32, dev);
  norm = data::normalisation_table(t, dev);
}

// Token windows: x and y i32 (max_batch, T), whatever the compute dtype (the model embeds the ids).
void SyntheticInput::Impl::allocate_tokens(const data::Transform& t) {
  if (!t.mean.empty() || t.crop_padding != 0 || t.hflip)
    DP_THROW_USER("data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows (data.dataset = "
                  "\"synthetic\" for a model that takes tokens); leave them out of the cfg");
  DP_CHECK(spec.block_size >= 1 && spec.vocab >= 1 && spec.vocab <= 65536,
           "synthetic input: token windows of {} + 1 tokens below {}", spec.block_size, spec.vocab);
  const Device dev = Device::cuda(gpu.device());
  x = Tensor::zeros({max_batch, spec.block_size}, DType::I32, dev);
  y = Tensor::zeros({max_batch, spec.block_size}, DType::I32, dev);
}

SyntheticInput::SyntheticInput(cuda::ExecContext& gpu, const SyntheticSpec& spec, const data::Transform& t,
                               int64_t max_batch, DType compute, bool channels_last)
    : impl_(new Impl{gpu, spec, max_batch, compute, {}, {}, {}, {}, {}, {}, {}}) {
  DP_CHECK(max_batch >= 1, "synthetic input: batch {}", max_batch);
  if (spec.tokens) {
    impl_->allocate_tokens(t);
  } else {
    impl_->geo = input_geometry(spec.shape, channels_last);
    impl_->allocate_images(t);
  }
}

SyntheticInput::~SyntheticInput() = default;

void SyntheticInput::set_order(const std::vector<int64_t>& order) {
  for (int64_t i : order)
    DP_CHECK(i >= 0 && static_cast<uint64_t>(i) < kernels::kSyntheticPatternId,
             "synthetic input: sample index {} out of range", i);
  impl_->host_order = order;
  if (order.empty()) return;
  const int64_t n = static_cast<int64_t>(order.size());
  Tensor host = Tensor::zeros({n}, DType::I64);
  std::memcpy(host.data<int64_t>(), order.data(), static_cast<size_t>(n) * sizeof(int64_t));
  if (!impl_->order.defined() || impl_->order.numel() < n)
    impl_->order = Tensor::zeros({n}, DType::I64, Device::cuda(impl_->gpu.device()));
  // Device-synchronous (runtime/device_memory.h): the previous epoch's batches are done with it.
  impl_->order.narrow0(0, n).copy_from(host);
}

// Rows [first, first + rows) of the order as images: labels, then the values (two kernels).
SyntheticInput::Batch SyntheticInput::Impl::make_images(int64_t first, int64_t rows) {
  const cudaStream_t s = gpu.compute();
  const auto* idx = order.data<int64_t>() + first;
  auto* labels = y.data<int32_t>();
  auto* first_words = reinterpret_cast<uint32_t*>(words.data<int32_t>());
  CHECK_CUDA(kernels::cuda::synthetic_labels(labels, first_words, idx, rows, spec.seed, spec.classes, s));
  const kernels::cuda::AugmentDims dims{rows, geo.channels, geo.height, geo.width};
  const float* mean = norm.defined() ? norm.data<float>() : nullptr;
  const float* stdv = mean ? mean + geo.channels : nullptr;
  CHECK_CUDA(kernels::cuda::synthetic_batch(x.raw(), out_type(compute), geo.nhwc, dims, idx, labels, first_words,
                                            spec.seed, mean, stdv, s));
  SyntheticInput::Batch b;
  b.x = x.narrow0(0, rows);
  b.y = y.narrow0(0, rows);
  b.y_host = Tensor::zeros({rows}, DType::I32);
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<uint64_t>(host_order[static_cast<size_t>(first + r)]);
    b.y_host.data<int32_t>()[r] =
        kernels::synthetic_label(spec.seed, kernels::synthetic_stream(i), static_cast<uint64_t>(spec.classes)).label;
  }
  return b;
}

// Rows [first, first + rows) of the order as token windows: inputs and targets (one kernel); the
// targets stay on the device, as the input pipeline's token batches do (batch_feed.h).
SyntheticInput::Batch SyntheticInput::Impl::make_tokens(int64_t first, int64_t rows) {
  const auto* idx = order.data<int64_t>() + first;
  CHECK_CUDA(kernels::cuda::synthetic_token_windows(x.data<int32_t>(), y.data<int32_t>(), idx, rows,
                                                    spec.block_size, spec.seed, spec.vocab, gpu.compute()));
  SyntheticInput::Batch b;
  b.x = x.narrow0(0, rows);
  b.y = y.narrow0(0, rows);
  return b;
}

SyntheticInput::Batch SyntheticInput::make(int64_t first, int64_t rows) {
  Impl& m = *impl_;
  DP_CHECK(rows >= 1 && rows <= m.max_batch && first >= 0 && first + rows <= static_cast<int64_t>(m.host_order.size()),
           "synthetic input: rows [{}, {}) of an order of {} in batches of up to {}", first, first + rows,
           m.host_order.size(), m.max_batch);
  return m.spec.tokens ? m.make_tokens(first, rows) : m.make_images(first, rows);
}

}  // namespace dp::launch
