// Data parallelism on the GPU through the real binary: 2 ranks sharing GPU 0 with the ring
// backend (device gradients staged through pinned memory, reduced on the communication stream
// while backward runs) end with the weights of 1 GPU rank at twice the batch, and the replicas
// are identical, in fp32 and with bf16 compute. Skips without a GPU (CudaDdpGpu).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/device_memory.h"
#include "tests/gpu_test.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::max_abs_diff;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";

std::string root_for(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("dptrain_cuda_ddp_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

std::string run(const std::string& root, int nproc, int batch, const std::string& precision) {
  std::string cmd = kBin + (nproc > 1 ? " --nproc " + std::to_string(nproc) : "") + " " + DPTRAIN_SOURCE_DIR +
                    "/models/fmnist_cnn.cfg --run-dir " + root +
                    " --set data.dataset='\"synthetic\"' --set data.synthetic_shape='[1, 28, 28]'"
                    " --set data.synthetic_train=1024 --set data.synthetic_eval=128 --set train.steps=12"
                    " --set train.warmup_steps=0 --set model.sync_bn=true --set checkpoint.replicas=true"
                    " --set train.device='\"cuda\"' --set dist.backend='\"ring\"'"
                    " --set train.precision='\"" + precision + "\"' --set train.batch_size=" + std::to_string(batch) +
                    " --log-level warn > " + root + ".log 2>&1";
  std::filesystem::create_directories(root);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return root + "/fmnist_cnn/final.safetensors";
}

class CudaDdpGpu : public dp::gputest::GpuTestWithParam<std::string> {};

DP_GPU_TEST_P(CudaDdpGpu, TwoRanksOnOneGpuEqualOneRankAtTwiceTheBatch) {
  const std::string p = GetParam();
  const std::string r1 = root_for("one" + p), r2 = root_for("two" + p);
  const double d = max_abs_diff(run(r1, 1, 64, p), run(r2, 2, 32, p));
  // fp32: summation order only; bf16: the two runs round different partial batches to 16 bits.
  EXPECT_LE(d, p == "fp32" ? 1e-4 : 2e-2) << "2 GPU ranks vs 1, " << p;
  const int rc = std::system((std::string(DPTRAIN_BINARY_DIR) + "/diffckpt --all " + r2 + "/fmnist_cnn/replicas > " +
                              r2 + ".diff 2>&1")
                                 .c_str());
  EXPECT_EQ(rc, 0) << "replicas differ; see " << r2 << ".diff";
  for (const auto& r : {r1, r2}) {
    std::filesystem::remove_all(r);
    std::filesystem::remove(r + ".log");
  }
  std::filesystem::remove(r2 + ".diff");
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaDdpGpu, testing::Values(std::string("fp32"), std::string("bf16")));

}  // namespace
