// SyntheticInput, synthetic training batches made on the GPU (launch/synthetic_input.h).
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
  InputGeometry geo;
  Tensor x;      // (max_batch, *sample) compute dtype
  Tensor y;      // i32 (max_batch)
  Tensor words;  // u32 as i32 (max_batch): where each row's noise starts in its stream
  Tensor norm;   // f32 (2, C): mean, std; undefined without normalisation
  Tensor order;  // i64 (epoch samples)
  std::vector<int64_t> host_order;
};

SyntheticInput::SyntheticInput(cuda::ExecContext& gpu, const SyntheticSpec& spec, const data::Transform& t,
                               int64_t max_batch, DType compute, bool channels_last)
    : impl_(new Impl{gpu, spec, max_batch, compute, input_geometry(spec.shape, channels_last), {}, {}, {}, {}, {}, {}}) {
  data::check_transform(t, spec.shape);
  if (t.crop_padding != 0 || t.hflip)
    DP_THROW_USER("data.synthetic_device = \"cuda\" makes batches without augmentation: set data.crop_padding = 0 and "
                  "data.hflip = false, or data.synthetic_device = \"cpu\"");
  DP_CHECK(max_batch >= 1 && spec.classes >= 1, "synthetic input: batch {} and {} classes", max_batch, spec.classes);
  (void)out_type(compute);
  const Device dev = Device::cuda(gpu.device());
  Shape xs{max_batch};
  xs.insert(xs.end(), spec.shape.begin(), spec.shape.end());
  impl_->x = Tensor::zeros(xs, compute, dev);
  impl_->y = Tensor::zeros({max_batch}, DType::I32, dev);
  impl_->words = Tensor::zeros({max_batch}, DType::I32, dev);
  if (!t.mean.empty()) {
    const int64_t c = static_cast<int64_t>(t.mean.size());
    Tensor host = Tensor::zeros({2, c}, DType::F32);
    std::memcpy(host.data<float>(), t.mean.data(), static_cast<size_t>(c) * sizeof(float));
    std::memcpy(host.data<float>() + c, t.std.data(), static_cast<size_t>(c) * sizeof(float));
    impl_->norm = Tensor::zeros({2, c}, DType::F32, dev);
    impl_->norm.copy_from(host);
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

SyntheticInput::Batch SyntheticInput::make(int64_t first, int64_t rows) {
  Impl& m = *impl_;
  DP_CHECK(rows >= 1 && rows <= m.max_batch && first >= 0 && first + rows <= static_cast<int64_t>(m.host_order.size()),
           "synthetic input: rows [{}, {}) of an order of {} in batches of up to {}", first, first + rows,
           m.host_order.size(), m.max_batch);
  const cudaStream_t s = m.gpu.compute();
  const auto* idx = m.order.data<int64_t>() + first;
  auto* y = m.y.data<int32_t>();
  auto* words = reinterpret_cast<uint32_t*>(m.words.data<int32_t>());
  CHECK_CUDA(kernels::cuda::synthetic_labels(y, words, idx, rows, m.spec.seed, m.spec.classes, s));
  const kernels::cuda::AugmentDims dims{rows, m.geo.channels, m.geo.height, m.geo.width};
  const float* mean = m.norm.defined() ? m.norm.data<float>() : nullptr;
  const float* stdv = mean ? mean + m.geo.channels : nullptr;
  CHECK_CUDA(kernels::cuda::synthetic_batch(m.x.raw(), out_type(m.compute), m.geo.nhwc, dims, idx, y, words,
                                            m.spec.seed, mean, stdv, s));
  Batch b;
  b.x = m.x.narrow0(0, rows);
  b.y = m.y.narrow0(0, rows);
  b.y_host = Tensor::zeros({rows}, DType::I32);
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<uint64_t>(m.host_order[static_cast<size_t>(first + r)]);
    b.y_host.data<int32_t>()[r] =
        kernels::synthetic_label(m.spec.seed, kernels::synthetic_stream(i), static_cast<uint64_t>(m.spec.classes)).label;
  }
  return b;
}

}  // namespace dp::launch
