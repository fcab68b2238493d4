// Device faults as clear errors (runtime/device_error.h, base/error.h, runtime/layer.cpp,
// runtime/fault_injection.h): the out-of-memory message's exact form, context added on the way up
// without changing an error's type, Layer::forward/backward naming the layer and pass of anything
// a layer raises, and the injected fault of DPTRAIN_FAULT_DEVICE_OOM_AT_STEP.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/device_error.h"
#include "runtime/device_memory.h"
#include "runtime/fault_injection.h"
#include "runtime/last_dispatch.h"
#include "runtime/layer.h"

namespace dp {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(FormatBytes, BytesThenBinaryUnitsWithTheExactCount) {
  EXPECT_EQ(format_bytes(0), "0 bytes");
  EXPECT_EQ(format_bytes(1023), "1023 bytes");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB (1024 bytes)");
  EXPECT_EQ(format_bytes(6422528), "6.1 MiB (6422528 bytes)");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.5 GiB (1610612736 bytes)");
  EXPECT_EQ(format_bytes(uint64_t{80} << 30), "80.0 GiB (85899345920 bytes)");
  EXPECT_EQ(format_bytes(uint64_t{2} << 40), "2.0 TiB (2199023255552 bytes)");
}

DeviceOomInfo allocation_in_a_layer() {
  DeviceOomInfo i;
  i.device = "cuda:0";
  i.call = "cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, cudaStreamPerThread)";
  i.source = "runtime/device_memory_cuda.cpp:27";
  i.identity = "rank 1/4 on node7";
  i.allocation = "its output (a [4096, 32, 56, 56] f32 tensor)";
  i.asked = uint64_t{1644167168};
  i.free = uint64_t{512} << 20, i.total = uint64_t{80} << 30;
  i.where = "layer 'conv1' (conv2d), forward";
  return i;
}

TEST(FormatDeviceOom, AnAllocationNamesLayerSizeFreeMemoryCallAndWhatToLower) {
  EXPECT_EQ(format_device_oom(allocation_in_a_layer()),
            "device out of memory on cuda:0 [rank 1/4 on node7] in layer 'conv1' (conv2d), forward: 1.5 GiB "
            "(1644167168 bytes) asked for its output (a [4096, 32, 56, 56] f32 tensor), 512.0 MiB (536870912 bytes) "
            "free of 80.0 GiB (85899345920 bytes) (cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, cudaStreamPerThread) "
            "at runtime/device_memory_cuda.cpp:27); lower train.batch_size (activations grow with it) or "
            "train.workspace_mb (the cuDNN/cuBLASLt scratch)");
}

TEST(FormatDeviceOom, TheWorkspaceNamesTrainWorkspaceMbFirst) {
  DeviceOomInfo i = allocation_in_a_layer();
  i.workspace = true;
  i.allocation = "the cuDNN/cuBLASLt workspace (at most 268435456 bytes: train.workspace_mb)";
  i.asked = 200 << 20;
  EXPECT_EQ(device_oom_hint(i),
            "lower train.workspace_mb (the scratch one cuDNN/cuBLASLt call may use) or train.batch_size");
  EXPECT_THAT(format_device_oom(i), HasSubstr(": 200.0 MiB (209715200 bytes) asked for the cuDNN/cuBLASLt workspace "
                                              "(at most 268435456 bytes: train.workspace_mb), 512.0 MiB"));
}

TEST(FormatDeviceOom, ALibrarysOwnAllocationHasNoSizeAndUnknownMemoryIsLeftOut) {
  DeviceOomInfo i;
  i.device = "cuda:3";
  i.call = "cudnnConvolutionForward(...): CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED (4004)";
  i.source = "conv2d_cuda.cpp:175";
  i.identity = "rank 0/1 on h";
  i.resume = "no checkpoint was written yet: a rerun starts over";
  EXPECT_EQ(format_device_oom(i),
            "device out of memory on cuda:3 [rank 0/1 on h]: an allocation of unknown size failed "
            "(cudnnConvolutionForward(...): CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED (4004) at "
            "conv2d_cuda.cpp:175); lower train.batch_size (activations grow with it) or train.workspace_mb (the "
            "cuDNN/cuBLASLt scratch); no checkpoint was written yet: a rerun starts over");
}

TEST(DeviceOutOfMemory, ContextAndAllocationGoIntoTheirPlacesAndTheTypeStays) {
  DeviceOomInfo i = allocation_in_a_layer();
  i.where.clear();
  i.allocation = "a [8, 3] f32 tensor";
  try {
    try {
      throw DeviceOutOfMemory(i);
    } catch (DpError& e) {  // what every layer of the code sees: a DpError
      e.add_context("layer 'fc' (linear), backward");
      throw;
    }
  } catch (DeviceOutOfMemory& e) {
    EXPECT_EQ(e.context(), "layer 'fc' (linear), backward");
    e.set_allocation("its input gradient");
    e.add_context("building the model");
    e.set_resume("the checkpoint of step 8 (c/step-00000008.safetensors) is intact: run the same command again to "
                 "resume from it");
    EXPECT_EQ(e.info().where, "building the model: layer 'fc' (linear), backward");
    EXPECT_EQ(e.info().allocation, "its input gradient (a [8, 3] f32 tensor)");
    EXPECT_EQ(std::string(e.what()), format_device_oom(e.info()));
    EXPECT_THAT(e.what(), StartsWith("device out of memory on cuda:0 [rank 1/4 on node7] in building the model: "
                                     "layer 'fc' (linear), backward: 1.5 GiB (1644167168 bytes) asked for its input "
                                     "gradient (a [8, 3] f32 tensor), 512.0 MiB"));
    EXPECT_THAT(e.what(), HasSubstr("; the checkpoint of step 8 (c/step-00000008.safetensors) is intact"));
    return;
  }
  FAIL() << "the DeviceOutOfMemory was not rethrown as one";
}

TEST(DpError, ContextIsPrefixedOutermostFirstAndTheTypeStays) {
  try {
    try {
      throw UserError("bad value");
    } catch (DpError& e) {
      EXPECT_EQ(e.context(), "");
      e.add_context("inner");
      e.add_context("outer");
      throw;
    }
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "outer: inner: bad value");
    EXPECT_EQ(e.context(), "outer: inner");
    return;
  }
  FAIL() << "not rethrown as a UserError";
}

TEST(DpError, ACopySharesNothingItsOriginalGainsLater) {
  DpError a("x");
  const DpError b = a;
  a.add_context("c");
  EXPECT_STREQ(a.what(), "c: x");
  EXPECT_STREQ(b.what(), "x");
}

TEST(LastDispatch, NamesTheLayerAndPassOfTheLastNoteOnThisThread) {
  EXPECT_EQ(dispatch_site("layer1.0.conv1", "conv2d", "backward"), "layer 'layer1.0.conv1' (conv2d), backward");
  note_dispatch("fc2", "linear", "forward");
  EXPECT_EQ(last_dispatch(), "layer 'fc2' (linear), forward");
  note_dispatch(std::string(200, 'n'), "relu", "backward");  // cut, never overrun
  EXPECT_EQ(last_dispatch(), "layer '" + std::string(95, 'n') + "' (relu), backward");
}

// A layer whose CPU path throws what it is told to.
class Thrower : public Layer {
 public:
  enum class What { Nothing, DpErr, User, Oom, Std };
  Thrower() : Layer("boom") {}
  const char* type() const override { return "thrower"; }
  Shape setup(const std::vector<Shape>& in) override { return in[0]; }
  What what = What::Nothing;

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>&, Tensor&) override { raise(); }
  void backward_cpu(const StepContext&, const std::vector<Tensor>&, const Tensor&, const Tensor&,
                    std::vector<Tensor>&) override {
    raise();
  }

 private:
  void raise() const {
    switch (what) {
      case What::Nothing: return;
      case What::DpErr: throw DpError("CUDA error: k<<<>>> at f.cu:3 [rank 0/1 on h]: an illegal memory access");
      case What::User: throw UserError("bad input");
      case What::Oom: {
        DeviceOomInfo i = allocation_in_a_layer();
        i.where.clear();
        throw DeviceOutOfMemory(i);
      }
      case What::Std: throw std::runtime_error("could not create a primitive");
    }
  }
};

TEST(LayerErrors, ForwardAndBackwardNameTheLayerAndPassAndKeepTheType) {
  Thrower l;
  StepContext ctx;
  std::vector<Tensor> x{Tensor::zeros({2, 3})}, dx{Tensor::zeros({2, 3})};
  Tensor y = Tensor::zeros({2, 3});
  l.what = Thrower::What::DpErr;
  try {
    l.forward(ctx, x, y);
    FAIL();
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "layer 'boom' (thrower), forward: CUDA error: k<<<>>> at f.cu:3 [rank 0/1 on h]: an illegal "
                           "memory access");
  }
  l.what = Thrower::What::User;
  EXPECT_THROW(l.backward(ctx, x, y, y, dx), UserError);
  try {
    l.backward(ctx, x, y, y, dx);
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "layer 'boom' (thrower), backward: bad input");
  }
  l.what = Thrower::What::Oom;
  try {
    l.backward(ctx, x, y, y, dx);
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().where, "layer 'boom' (thrower), backward");
    EXPECT_THAT(e.what(), StartsWith("device out of memory on cuda:0 [rank 1/4 on node7] in layer 'boom' (thrower), "
                                     "backward: 1.5 GiB"));
  }
  l.what = Thrower::What::Std;  // not ours: becomes a DpError with the layer named
  try {
    l.forward(ctx, x, y);
    FAIL();
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "layer 'boom' (thrower), forward: could not create a primitive");
  }
  l.what = Thrower::What::Nothing;
  EXPECT_NO_THROW(l.forward(ctx, x, y));
}

TEST(InjectedDeviceOom, TheNextDispatchFailsOnceAsAnAllocationOfItsOutputWould) {
  Thrower l;
  StepContext ctx;
  std::vector<Tensor> x{Tensor::zeros({2, 3})};
  Tensor y = Tensor::zeros({2, 3});
  EXPECT_FALSE(device_oom_fault_armed());
  arm_device_oom_fault("DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=3");
  try {
    l.forward(ctx, x, y);
    FAIL() << "the armed fault did not fire";
  } catch (const DeviceOutOfMemory& e) {
    const MemoryInfo host = host_memory_info();
    EXPECT_EQ(e.info().device, "cpu");
    EXPECT_EQ(e.info().asked, 24u);
    EXPECT_EQ(e.info().total, host.total);
    EXPECT_GT(e.info().free, 0u);
    EXPECT_EQ(e.info().call, "DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=3, an injected fault");
    EXPECT_EQ(e.info().where, "layer 'boom' (thrower), forward");
    EXPECT_THAT(e.what(), StartsWith("device out of memory on cpu [" + identity_string() +
                                     "] in layer 'boom' (thrower), forward: 24 bytes asked for a [2, 3] f32 tensor, "
                                     "its output's size, "));
    EXPECT_THAT(e.what(), HasSubstr(" (DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=3, an injected fault); lower train.batch_size"));
  }
  EXPECT_FALSE(device_oom_fault_armed());
  EXPECT_NO_THROW(l.forward(ctx, x, y));
}

}  // namespace
}  // namespace dp
