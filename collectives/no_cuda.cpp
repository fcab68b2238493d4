// What a build without CUDA has instead of collectives' CUDA halves (the *_cuda.cpp files and
// nccl/, which only a CUDA build compiles; the top CMakeLists.txt compiles this file only without
// CUDA). No device tensor can exist in such a build, so none of this is reached: the entry points
// say the build has no CUDA, the rest does nothing.
#include "base/error.h"
#include "collectives/communicator.h"
#include "collectives/device_staging.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/reducer/reducer.h"

namespace dp {

// communicator.h
WorkPtr Communicator::allreduce_stream_async(const Tensor& t, ReduceOp, void*) {
  throw DpError(fmt::format("{} allreduce_stream_async of {}: this build has no CUDA", backend(),
                            t.defined() ? t.describe() : "an undefined tensor"));
}

WorkPtr Communicator::reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp, void*) {
  throw DpError(fmt::format("{} reduce_scatter_blocks_stream_async of {}: this build has no CUDA", backend(),
                            t.defined() ? t.describe() : "an undefined tensor"));
}

// device_staging.h
struct DeviceStaging::Buffer {};
struct DeviceStaging::Impl {};

DeviceStaging::DeviceStaging() : impl_(std::make_unique<Impl>()) {}
DeviceStaging::~DeviceStaging() = default;
DeviceStaging::LeasePtr DeviceStaging::acquire(size_t, int device) {
  throw DpError(fmt::format("device staging for cuda:{}: this build has no CUDA", device));
}
size_t DeviceStaging::buffers_allocated() const { return 0; }
void DeviceStaging::give_back(Buffer*) noexcept {}
DeviceStaging::Lease::~Lease() = default;
char* DeviceStaging::Lease::host() const { return nullptr; }
void DeviceStaging::Lease::copy_in(const Tensor&, size_t, void*) {}
void DeviceStaging::Lease::wait_in() {}
void DeviceStaging::Lease::copy_out(size_t, const Tensor&) {}

// nccl/nccl_communicator.h: make_communicator refuses nccl in this build before it gets here.
std::unique_ptr<Communicator> make_nccl_communicator(Bootstrap&, double, int) {
  throw DpError("the nccl backend needs a CUDA build");
}

// reducer/reducer.h
void Reducer::init_gpu() { throw DpError("reducer: ReducerOptions::gpu is set but this build has no CUDA"); }
void Reducer::launch_gpu(size_t) {}
void Reducer::zero_unused_gpu() {}
void Reducer::finish_gpu() {}

}  // namespace dp
