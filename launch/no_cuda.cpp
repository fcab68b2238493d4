// What a build without CUDA has instead of launch's CUDA halves (the *_cuda.cpp files, which only
// a CUDA build compiles; the top CMakeLists.txt compiles this file only without CUDA). The device
// choice never picks a GPU in such a build, so none of this is reached.
#include "base/error.h"
#include "launch/batch_feed.h"

namespace dp::launch {

// batch_feed.h
void DeviceInputDeleter::operator()(DeviceInput*) const {}

DeviceInputPtr make_device_input(GpuRun&, const data::Transform&, const data::Dataset&, int64_t, uint64_t) {
  throw DpError("the GPU input pipeline needs a CUDA build");
}

bool BatchFeed::next_device(Item&) { return false; }
bool BatchFeed::pull() { return false; }

}  // namespace dp::launch
