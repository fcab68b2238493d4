// defines: helpers of the emulator's self-tests: DeviceArray (a cudaMalloc'ed array with upload
// and download) and LaunchResult (cudaGetLastError after a launch, with the fault message).
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/emu/errors.h"

namespace dp::emu::test {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(&p_, n * sizeof(T)), cudaSuccess); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  void upload(const std::vector<T>& host) const {
    ASSERT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// What the last launch reported: its status (cudaGetLastError, which clears it) and, for a
// fault, the emulator's message.
struct LaunchResult {
  cudaError_t status;
  std::string message;
};
inline LaunchResult last_launch() {
  const cudaError_t e = cudaGetLastError();
  return LaunchResult{e, e == cudaErrorLaunchFailure ? last_fault_message() : std::string()};
}

}  // namespace dp::emu::test
