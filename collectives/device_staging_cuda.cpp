// DeviceStaging on CUDA (collectives/device_staging.h): the pool of pinned buffers, the staging
// streams, the copies and their events.
#include "collectives/device_staging.h"

#include <mutex>
#include <vector>

#include "base/error.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"
#include "runtime/log.h"

namespace dp {

struct DeviceStaging::Buffer {
  cuda::PinnedBuffer mem;
  cuda::CudaEvent in{/*timing=*/false};   // recorded after the copy in
  cuda::CudaEvent out{/*timing=*/false};  // recorded after the copy out
  int device;  // the events belong to it
  bool busy = false;
  Buffer(size_t bytes, int dev) : mem(bytes), device(dev) {}
};

struct DeviceStaging::Impl {
  mutable std::mutex mu;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<cuda::CudaStream> streams;  // per device index, made on first use

  cudaStream_t stream(int device) {
    std::lock_guard lock(mu);
    if (static_cast<int>(streams.size()) <= device) streams.resize(static_cast<size_t>(device) + 1);
    if (!streams[static_cast<size_t>(device)]) streams[static_cast<size_t>(device)] = cuda::CudaStream(device);
    return streams[static_cast<size_t>(device)].get();
  }
};

DeviceStaging::DeviceStaging() : impl_(std::make_unique<Impl>()) {}
DeviceStaging::~DeviceStaging() = default;

DeviceStaging::LeasePtr DeviceStaging::acquire(size_t bytes, int device) {
  CHECK_CUDA(cudaSetDevice(device));  // events are made on, and recorded on streams of, this device
  std::lock_guard lock(impl_->mu);
  std::vector<StagingBufferInfo> info;
  for (const auto& b : impl_->buffers) info.push_back({b->mem.bytes(), b->device, b->busy});
  const int i = choose_staging_buffer(info, bytes, device);
  Buffer* best = i >= 0 ? impl_->buffers[static_cast<size_t>(i)].get() : nullptr;
  if (!best) {
    impl_->buffers.push_back(std::make_unique<Buffer>(bytes, device));
    best = impl_->buffers.back().get();
    log::get("coll")->debug("device staging: pinned buffer #{} of {} bytes", impl_->buffers.size(), bytes);
  }
  best->busy = true;
  return LeasePtr(new Lease(this, best, device));
}

size_t DeviceStaging::buffers_allocated() const {
  std::lock_guard lock(impl_->mu);
  return impl_->buffers.size();
}

void DeviceStaging::give_back(Buffer* b) noexcept {
  std::lock_guard lock(impl_->mu);
  b->busy = false;
}

DeviceStaging::Lease::~Lease() {
  if (copied_in_) cuda::log_if_failed(cudaEventSynchronize(buffer_->in.get()), "staging: cudaEventSynchronize");
  owner_->give_back(buffer_);
}

char* DeviceStaging::Lease::host() const { return buffer_->mem.as<char>(); }

void DeviceStaging::Lease::copy_in(const Tensor& src, size_t offset, void* stream) {
  DP_CHECK(src.device() == Device::cuda(device_), "device staging: {} is not on cuda:{}", src.describe(), device_);
  DP_CHECK(!copied_in_ && offset + src.nbytes() <= buffer_->mem.bytes(), "device staging: copy of {} bytes at {} "
           "into a buffer of {}", src.nbytes(), offset, buffer_->mem.bytes());
  CHECK_CUDA(cudaSetDevice(device_));
  cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : owner_->impl_->stream(device_);
  if (src.nbytes() > 0)
    CHECK_CUDA(cudaMemcpyAsync(host() + offset, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, s));
  buffer_->in.record(s);
  copied_in_ = true;
}

void DeviceStaging::Lease::wait_in() {
  if (copied_in_) buffer_->in.synchronize();
}

void DeviceStaging::Lease::copy_out(size_t offset, const Tensor& dst) {
  DP_CHECK(dst.device() == Device::cuda(device_), "device staging: {} is not on cuda:{}", dst.describe(), device_);
  DP_CHECK(offset + dst.nbytes() <= buffer_->mem.bytes(), "device staging: copy of {} bytes at {} out of a buffer "
           "of {}", dst.nbytes(), offset, buffer_->mem.bytes());
  if (dst.nbytes() == 0) return;
  CHECK_CUDA(cudaSetDevice(device_));
  cudaStream_t s = owner_->impl_->stream(device_);
  CHECK_CUDA(cudaMemcpyAsync(dst.raw(), host() + offset, dst.nbytes(), cudaMemcpyHostToDevice, s));
  buffer_->out.record(s);
  buffer_->out.synchronize();
}

}  // namespace dp
