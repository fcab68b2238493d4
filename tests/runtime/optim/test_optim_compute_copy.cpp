// Optimizer::write_compute_copy (runtime/optim/optimizer.h): mixed precision's 16-bit weights
// written by the fused optimizer's own pass. On a GPU (OptimizerComputeCopyGpu): after each step
// the copy equals the updated parameters rounded to bf16 / f16 (base/half.h's conversions, the
// bits refresh_compute_params' cast writes), and the parameters are the CPU optimizer's (within
// the 1 ulp tests/kernels/test_cuda_optim.cpp allows). The
// argument checks run everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/gpu_test.h"
#include "base/error.h"
#include "base/half.h"
#include "runtime/device_memory.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/stream.h"
#endif

namespace dp::optim {
namespace {

TEST(OptimizerComputeCopy, IsWrittenOnlyOnAGpuAndOnlyIntoAMatchingTensor) {
  auto opt = make_sgd(4, SgdOptions{});
  EXPECT_FALSE(opt->writes_compute_copy());
  opt->write_compute_copy(Tensor());  // none: always fine
  EXPECT_FALSE(opt->writes_compute_copy());
  try {
    opt->write_compute_copy(Tensor::zeros({4}, DType::BF16));
    FAIL() << "a CPU optimizer took a compute copy";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("only on a GPU"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(opt->writes_compute_copy());
}

#ifdef DPTRAIN_HAVE_CUDA
std::vector<float> host(const Tensor& t) {
  Tensor h = Tensor::zeros(t.shape(), DType::F32);
  h.copy_from(t);
  return {h.data<float>(), h.data<float>() + h.numel()};
}

// Distance in representable floats (tests/kernels/test_cuda_optim.cpp allows the CPU twin 1).
int64_t ulps(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  const int64_t kx = x < 0 ? int64_t{INT32_MIN} - x : x, ky = y < 0 ? int64_t{INT32_MIN} - y : y;
  return kx > ky ? kx - ky : ky - kx;
}

DP_GPU_TEST(OptimizerComputeCopyGpu, EachStepWritesItsParametersRoundedTo16Bits) {
  cuda::CudaStream stream(0);
  const Device dev = Device::cuda(0);
  const int64_t n = 100003;  // not a multiple of the vector width
  std::mt19937_64 gen(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const char* rule : {"sgd", "adamw"})
    for (DType dt : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(testing::Message() << rule << " " << dtype_name(dt));
      auto make = [&] {
        return std::string(rule) == "sgd" ? make_sgd(n, SgdOptions{0.9, 0, 5e-4, true}) : make_adamw(n, AdamWOptions{});
      };
      auto cpu = make(), gpu = make();
      gpu->place(dev, stream.get());
      Tensor p_cpu = Tensor::zeros({n}), g_cpu = Tensor::zeros({n});
      for (int64_t i = 0; i < n; ++i) p_cpu.data<float>()[i] = nd(gen);
      Tensor p = Tensor::zeros({n}, DType::F32, dev), g = Tensor::zeros({n}, DType::F32, dev);
      p.copy_from(p_cpu);
      Tensor copy = Tensor::zeros({n}, dt, dev);
      EXPECT_THROW(gpu->write_compute_copy(Tensor::zeros({n - 1}, dt, dev)), DpError);
      EXPECT_THROW(gpu->write_compute_copy(Tensor::zeros({n}, DType::F32, dev)), DpError);
      gpu->write_compute_copy(copy);
      ASSERT_TRUE(gpu->writes_compute_copy());
      for (int step = 0; step < 3; ++step) {
        for (int64_t i = 0; i < n; ++i) g_cpu.data<float>()[i] = nd(gen) * 1e-2f;
        g.copy_from(g_cpu);
        cpu->step(p_cpu, g_cpu, 0.01);
        gpu->step(p, g, 0.01);
        stream.synchronize();
        const std::vector<float> got = host(p);
        Tensor c = Tensor::zeros({n}, dt);
        c.copy_from(copy);
        const auto* bits = static_cast<const uint16_t*>(c.raw());
        int64_t differ = 0, bad_copy = 0;
        for (int64_t i = 0; i < n; ++i) {
          differ += ulps(got[i], p_cpu.data<float>()[i]) > 1;
          const uint16_t want = dt == DType::BF16 ? kernels::cpu::f32_to_bf16(got[i]) : kernels::cpu::f32_to_f16(got[i]);
          bad_copy += bits[i] != want;
        }
        EXPECT_EQ(differ, 0) << "step " << step << ": parameters more than 1 ulp from the CPU optimizer's";
        EXPECT_EQ(bad_copy, 0) << "step " << step << ": 16-bit copy elements not the rounded parameters";
      }
    }
}
#endif

}  // namespace
}  // namespace dp::optim
