// defines: helpers of the GPU layer tests: host <-> device copies of test tensors in a compute
// dtype (F32, BF16, F16) and layout (NCHW, or NHWC under channels_last), values rounded through
// a 16-bit dtype, guarded device tensors (sentinel bytes before and after, to catch
// out-of-bounds writes) and GpuLayer, a layer bound to device parameters like the graph binds
// them. Only in a CUDA build.
#pragma once
#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/half.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"
#include "runtime/device_memory.h"
#include "tests/models/layer_harness.h"

namespace dp::test::gpu {

constexpr unsigned char kSentinel = 0xA5;
constexpr size_t kGuard = 4096;

// v rounded to the nearest value of dtype (F32, BF16, F16), as a double.
inline double round_to(double v, DType dtype) {
  const float f = static_cast<float>(v);
  if (dtype == DType::BF16) return kernels::cpu::bf16_to_f32(kernels::cpu::f32_to_bf16(f));
  if (dtype == DType::F16) return kernels::cpu::f16_to_f32(kernels::cpu::f32_to_f16(f));
  return f;
}

// A CPU f64 copy of t with every element rounded through `dtype`.
inline Tensor rounded(const Tensor& t, DType dtype) {
  Tensor out = cast(t, DType::F64);
  for (int64_t i = 0; i < out.numel(); ++i) set(out, i, round_to(get(out, i), dtype));
  return out;
}

// A CPU f64 copy of a CPU tensor of any dtype the layers keep: f32/f64 (layer_harness.h's get),
// i64/i32 (num_batches_tracked) value by value. What to compare download()'s f64 with:
// layer_harness.h's cast() leaves integer tensors as they are, and get() reads f32/f64 only.
inline Tensor to_f64(const Tensor& t) {
  if (is_floating(t.dtype())) return cast(t, DType::F64);
  Tensor out = Tensor::zeros(t.shape(), DType::F64);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.data<double>()[i] = t.dtype() == DType::I64 ? static_cast<double>(t.data<int64_t>()[i]) : t.data<int32_t>()[i];
  return out;
}

// Index of logical NCHW element (n, c, h, w) in NHWC memory.
inline int64_t nhwc_index(const Shape& s, int64_t i) {
  const int64_t C = s[1], H = s[2], W = s[3];
  const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
  return ((n * H + h) * W + w) * C + c;
}

// A zero-filled device tensor whose storage has kGuard sentinel bytes before and after it.
inline Tensor guarded_zeros(const Shape& shape, DType dtype, Device dev) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto st = Storage::allocate(bytes + 2 * kGuard, dev);
  CHECK_CUDA(cudaMemset(st->data(), kSentinel, st->bytes()));
  CHECK_CUDA(cudaMemset(static_cast<char*>(st->data()) + kGuard, 0, bytes));
  CHECK_CUDA(cudaDeviceSynchronize());
  return Tensor::view_of(st, kGuard, shape, dtype);
}

// True when the guard bytes around a guarded_zeros tensor are untouched.
inline bool guards_intact(const Tensor& t) {
  std::vector<unsigned char> all(t.storage()->bytes());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(all.data(), t.storage()->data(), all.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < kGuard; ++i)
    if (all[i] != kSentinel || all[all.size() - 1 - i] != kSentinel) return false;
  return true;
}

// Uploads a CPU float tensor (logical NCHW for 4-D) as `dtype`, NHWC when channels_last and
// 4-D, into a guarded device tensor. Integer tensors are uploaded as they are.
inline Tensor upload(const Tensor& host, DType dtype, bool channels_last, Device dev) {
  if (!is_floating(host.dtype())) {
    Tensor d = guarded_zeros(host.shape(), host.dtype(), dev);
    d.copy_from(host);
    return d;
  }
  const bool nhwc = channels_last && host.ndim() == 4;
  const int64_t n = host.numel();
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = nhwc ? nhwc_index(host.shape(), i) : i;
    const float f = static_cast<float>(get(host, i));
    if (dtype == DType::F32) std::memcpy(&bytes[j * 4], &f, 4);
    else if (dtype == DType::F64) {
      const double d = get(host, i);
      std::memcpy(&bytes[j * 8], &d, 8);
    } else {
      const uint16_t h = dtype == DType::BF16 ? kernels::cpu::f32_to_bf16(f) : kernels::cpu::f32_to_f16(f);
      std::memcpy(&bytes[j * 2], &h, 2);
    }
  }
  Tensor d = guarded_zeros(host.shape(), dtype, dev);
  CHECK_CUDA(cudaMemcpy(d.raw(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return d;
}

// A CPU f64 tensor (logical NCHW) with the device tensor's values.
inline Tensor download(const Tensor& dev, bool channels_last) {
  const bool nhwc = channels_last && dev.ndim() == 4;
  std::vector<unsigned char> bytes(dev.nbytes());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(bytes.data(), dev.raw(), bytes.size(), cudaMemcpyDeviceToHost));
  Tensor out = Tensor::zeros(dev.shape(), DType::F64);
  for (int64_t i = 0; i < dev.numel(); ++i) {
    const int64_t j = nhwc ? nhwc_index(dev.shape(), i) : i;
    double v = 0;
    switch (dev.dtype()) {
      case DType::F32: { float f; std::memcpy(&f, &bytes[j * 4], 4); v = f; break; }
      case DType::F64: std::memcpy(&v, &bytes[j * 8], 8); break;
      case DType::BF16: case DType::F16: {
        uint16_t h;
        std::memcpy(&h, &bytes[j * 2], 2);
        v = dev.dtype() == DType::BF16 ? kernels::cpu::bf16_to_f32(h) : kernels::cpu::f16_to_f32(h);
        break;
      }
      case DType::I64: { int64_t k; std::memcpy(&k, &bytes[j * 8], 8); v = static_cast<double>(k); break; }
      case DType::I32: { int32_t k; std::memcpy(&k, &bytes[j * 4], 4); v = k; break; }
      default: throw DpError("download: unsupported dtype");
    }
    out.data<double>()[i] = v;
  }
  return out;
}

// A layer bound on the GPU the way Graph binds it: trainable parameters and their gradients in
// `compute` when low_precision_params(), else F32; float buffers F32; integer buffers as
// declared. Values are copied from a CPU TestLayer (rounded through the parameter dtype).
struct GpuLayer {
  std::unique_ptr<Layer> layer;
  Shape out;
  DType param_dtype = DType::F32;
  std::vector<Tensor> params, grads, buffers;

  GpuLayer(const LayerCase& c, const TestLayer& cpu, DType compute, Device dev) {
    layer = make_layer(c.type, c.args, c.name);
    out = layer->setup(c.in);
    param_dtype = layer->low_precision_params() ? compute : DType::F32;
    for (const auto& p : cpu.params) {
      params.push_back(upload(p, param_dtype, false, dev));
      grads.push_back(guarded_zeros(p.shape(), param_dtype, dev));
    }
    for (const auto& b : cpu.buffers) buffers.push_back(upload(b, is_floating(b.dtype()) ? DType::F32 : b.dtype(), false, dev));
    layer->bind(params, grads, buffers);
  }
};

}  // namespace dp::test::gpu
#endif  // DPTRAIN_HAVE_CUDA
