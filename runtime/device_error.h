// defines: DeviceOutOfMemory, the one error every failed device allocation becomes (a tensor's
// storage, a DeviceBuffer, the cuDNN/cuBLASLt workspace, an allocation inside cuDNN or cuBLAS, a
// cudaErrorMemoryAllocation from any CUDA call), DeviceOomInfo, what it carries, and
// format_device_oom, its one-line message (pure).
//
// It travels up like any DpError and gains where it happened on the way: the tensor's shape
// (Tensor::zeros), "the cuDNN/cuBLASLt workspace" (cuda::ExecContext), the layer and pass
// (Layer::forward/backward), a layer's output or input gradient (Graph), the checkpoint a rerun
// resumes from (the trainer). dptrain exits with its own status for it (launch/cli.h).
#pragma once
#include <cstdint>
#include <string>

#include "base/error.h"

namespace dp {

struct DeviceOomInfo {
  std::string device;      // "cuda:0" ("cpu" for the injected fault on the CPU path)
  std::string call;        // what failed: "cudaMallocAsync", or a library call's expression
  std::string source;      // "file.cpp:12" of the failing call
  std::string identity;    // "rank 0/4 on host" (identity_string())
  std::string allocation;  // what was being allocated, when known: "a [128, 32, 28, 28] f32 tensor"
  bool workspace = false;  // the allocation was the cuDNN/cuBLASLt workspace (train.workspace_mb)
  uint64_t asked = 0;      // bytes; 0: not known (an allocation inside a library)
  uint64_t free = 0, total = 0;  // the device's memory right after the failure; total 0: not known
  std::string where;       // the layer and pass, ... (outermost first; "" when none is known)
  std::string resume;      // what a rerun does (the trainer: the checkpoint it resumes from)
};

// "1.5 GiB (1610612736 bytes)"; "0 bytes". Pure.
std::string format_bytes(uint64_t bytes);
// What to lower: the workspace key first when the workspace failed, else the batch. Pure.
std::string device_oom_hint(const DeviceOomInfo& info);
// The error's one line. Pure. For example:
//   device out of memory on cuda:0 [rank 0/1 on h] in layer 'conv1' (conv2d), forward: 1.5 GiB (1610612736 bytes)
//   asked for its output (a [4096, 32, 56, 56] f32 tensor), 512.0 MiB (536870912 bytes) free of 79.2 GiB
//   (85045231616 bytes) (cudaMallocAsync(...) at runtime/device_memory_cuda.cpp:28); lower train.batch_size
//   (activations grow with it) or train.workspace_mb (the cuDNN/cuBLASLt scratch)
std::string format_device_oom(const DeviceOomInfo& info);

class DeviceOutOfMemory : public DpError {
 public:
  explicit DeviceOutOfMemory(DeviceOomInfo info);
  const DeviceOomInfo& info() const { return info_; }
  // Into the message's "in <where>" part, not in front of it.
  void add_context(const std::string& where) override;
  // Names what was being allocated; an outer caller adds the role to what an inner one said:
  // "a [8, 3] f32 tensor" becomes "its output (a [8, 3] f32 tensor)". workspace: the
  // cuDNN/cuBLASLt workspace (the hint then names train.workspace_mb first).
  void set_allocation(const std::string& allocation, bool workspace = false);
  void set_resume(const std::string& resume);

 private:
  DeviceOomInfo info_;
};

}  // namespace dp
