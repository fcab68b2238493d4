// The device choice is a pure function: every rule tested with made-up GPU counts, no GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/cuda/device_choice.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;

TEST(DeviceChoice, ParsesTheThreeWordsAndNamesThemOtherwise) {
  EXPECT_EQ(parse_device_request("auto"), DeviceRequest::Auto);
  EXPECT_EQ(parse_device_request("cpu"), DeviceRequest::Cpu);
  EXPECT_EQ(parse_device_request("cuda"), DeviceRequest::Cuda);
  try {
    parse_device_request("gpu");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.device = \"gpu\" is not a device; use \"auto\", \"cpu\" or \"cuda\""));
  }
}

TEST(DeviceChoice, CpuIsTheCpuWhateverTheGpus) {
  for (int gpus : {0, 1, 8}) {
    DeviceChoice c = choose_local_device(DeviceRequest::Cpu, 3, 4, gpus, CollectiveBackend::Nccl);
    EXPECT_EQ(c.device, Device::cpu()) << gpus;
    EXPECT_EQ(c.note, "");
  }
}

TEST(DeviceChoice, NoGpuAutoFallsBackWithOneLineCudaIsAnError) {
  DeviceChoice c = choose_local_device(DeviceRequest::Auto, 0, 1, 0, CollectiveBackend::Ring);
  EXPECT_EQ(c.device, Device::cpu());
  EXPECT_EQ(c.note, "no GPU found; training on the CPU");
  try {
    choose_local_device(DeviceRequest::Cuda, 0, 1, 0, CollectiveBackend::Ring);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.device = \"cuda\" but no usable GPU was found"));
  }
}

TEST(DeviceChoice, EachLocalRankGetsItsOwnGpu) {
  for (int r = 0; r < 4; ++r) {
    for (DeviceRequest want : {DeviceRequest::Auto, DeviceRequest::Cuda}) {
      DeviceChoice c = choose_local_device(want, r, 4, 4, CollectiveBackend::Nccl);
      EXPECT_EQ(c.device, Device::cuda(r));
      EXPECT_EQ(c.note, "");
    }
    // More GPUs than ranks: the first local_size ones.
    EXPECT_EQ(choose_local_device(DeviceRequest::Auto, r, 4, 8, CollectiveBackend::Nccl).device, Device::cuda(r));
  }
}

TEST(DeviceChoice, RingSharesGpusRoundRobinAndSaysSo) {
  const int expected[6] = {0, 1, 0, 1, 0, 1};
  for (int r = 0; r < 6; ++r) {
    DeviceChoice c = choose_local_device(DeviceRequest::Auto, r, 6, 2, CollectiveBackend::Ring);
    EXPECT_EQ(c.device, Device::cuda(expected[r])) << r;
  }
  EXPECT_EQ(choose_local_device(DeviceRequest::Cuda, 3, 4, 1, CollectiveBackend::Ring).note,
            "4 processes on this node share 1 GPU(s); local rank 3 uses GPU 0");
}

// Slurm's --gpus-per-task=1 gives each of 4 ranks one visible GPU of its own: every rank uses
// its device 0, and nccl runs. Whether ranks really share a GPU only the GPUs' UUIDs tell: the
// nccl backend checks them (NcclGpuAssignment tests), not the device choice.
TEST(DeviceChoice, NcclWithOneVisibleGpuPerRankUsesItAndLeavesSharingToTheUuidCheck) {
  for (int r = 0; r < 4; ++r) {
    DeviceChoice c = choose_local_device(DeviceRequest::Auto, r, 4, 1, CollectiveBackend::Nccl);
    EXPECT_EQ(c.device, Device::cuda(0)) << r;
    EXPECT_EQ(c.note, fmt::format("4 processes on this node, 1 visible GPU(s) each; local rank {} uses GPU 0 (the "
                                  "nccl backend checks that no two ranks drive one GPU)",
                                  r));
  }
  EXPECT_EQ(choose_local_device(DeviceRequest::Cuda, 3, 4, 2, CollectiveBackend::Nccl).device, Device::cuda(1));
  // With no GPU at all, nccl is the trainer's concern (it needs a GPU either way): auto -> CPU.
  EXPECT_EQ(choose_local_device(DeviceRequest::Auto, 0, 4, 0, CollectiveBackend::Nccl).device, Device::cpu());
}

TEST(DeviceChoice, BootstrapInvariantsAreChecked) {
  EXPECT_THROW(choose_local_device(DeviceRequest::Auto, 2, 2, 1, CollectiveBackend::Ring), DpError);
  EXPECT_THROW(choose_local_device(DeviceRequest::Auto, -1, 2, 1, CollectiveBackend::Ring), DpError);
  EXPECT_THROW(choose_local_device(DeviceRequest::Auto, 0, 0, 1, CollectiveBackend::Ring), DpError);
  EXPECT_THROW(choose_local_device(DeviceRequest::Auto, 0, 1, -1, CollectiveBackend::Ring), DpError);
}

}  // namespace
}  // namespace dp::cuda
