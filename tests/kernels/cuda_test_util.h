// defines: helpers of the CUDA kernel tests (tests/kernels/test_cuda_*.cpp and the layers' kernel
// tests): Guarded (a device array with guard regions before and after it, filled with a sentinel,
// to catch out-of-bounds writes), fresh random inputs (seed printed on failure), ulp distance, and
// GpuTest, the base of their GPU fixtures (tests/gpu_test.h: DP_GPU_TEST_F over a fixture named
// ...Gpu).
#pragma once
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/cuda/buffers.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/device_memory.h"
#include "tests/gpu_test.h"

namespace dp::kernels::cuda::test {

constexpr unsigned char kSentinel = 0xA5;  // a NaN pattern in f32, an odd value in every type
constexpr size_t kGuardBytes = 4096;

// n elements of T on the device between two guard regions of sentinel bytes.
template <typename T>
class Guarded {
 public:
  Guarded(size_t n, cudaStream_t stream)
      : n_(n), stream_(stream), buf_(n * sizeof(T) + 2 * kGuardBytes, stream) {
    CHECK_CUDA(cudaMemsetAsync(buf_.data(), kSentinel, buf_.bytes(), stream));
  }
  explicit Guarded(const std::vector<T>& host, cudaStream_t stream) : Guarded(host.size(), stream) { upload(host); }
  T* get() const { return reinterpret_cast<T*>(buf_.as<unsigned char>() + kGuardBytes); }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) const {
    CHECK_CUDA(cudaMemcpyAsync(get(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, stream_));
  }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    CHECK_CUDA(cudaMemcpyAsync(out.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost, stream_));
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    return out;
  }
  // True when no byte before or after the n elements changed.
  bool guards_intact() const {
    std::vector<unsigned char> all(buf_.bytes());
    CHECK_CUDA(cudaMemcpyAsync(all.data(), buf_.data(), all.size(), cudaMemcpyDeviceToHost, stream_));
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (all[i] != kSentinel || all[all.size() - 1 - i] != kSentinel) return false;
    return true;
  }

 private:
  size_t n_;
  cudaStream_t stream_;
  dp::cuda::DeviceBuffer buf_;
};

// A fresh seed per test run (the inputs are new every time); SCOPED_TRACE it to reproduce.
inline uint64_t fresh_seed() { return (uint64_t{std::random_device{}()} << 32) | std::random_device{}(); }

// The base of the GPU kernel tests' fixtures: skips without a GPU (tests/gpu_test.h), a stream on
// device 0, a fresh seed (print seed_ on failure) and its generator.
class GpuTest : public ::dp::gputest::GpuFixture<> {
 protected:
  void GpuSetUp() override {
    stream_ = dp::cuda::CudaStream(0);
    seed_ = fresh_seed();
    gen_.seed(seed_);
  }
  cudaStream_t s() const { return stream_.get(); }
  dp::cuda::CudaStream stream_;
  uint64_t seed_ = 0;
  std::mt19937_64 gen_;
};

inline std::vector<float> normal_floats(size_t n, std::mt19937_64& g, float stddev = 1.0f) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Distance in representable floats (0 = same bits, up to -0 == +0); huge across signs or NaN.
inline int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  if (a != a || b != b) return INT64_MAX;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  const int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace dp::kernels::cuda::test
#endif  // DPTRAIN_HAVE_CUDA
