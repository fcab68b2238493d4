// launch/step_readback.h, the trainer's one read of a GPU step (each micro-batch's loss and hits,
// read after backward), against the CPU calls the CPU trainer makes: SoftmaxCrossEntropy's CPU
// forward_backward for the loss and its gradient (times the micro-batch's scale), kernels/cpu/
// label_rank.h for the hits. Micro-batches of different sizes, padded rows, a second step with
// more and larger micro-batches than the first (the pinned slots grow, keeping what is in them),
// a bad label (the CPU path's message, naming its index in its micro-batch) and NaN logits (a NaN
// loss, no error). Runs on the CUDA emulator in every CI run (test_kernels_emu) and on a GPU in
// the runbook's call; skips in the real build without a GPU.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/label_rank.h"
#include "launch/step_readback.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::launch {
namespace {

using kernels::cuda::test::GpuTest;

// One micro-batch: logits (rows, ld) of which the first `classes` columns are classes (0: all),
// labels, and what the CPU calls give for them.
struct MicroBatch {
  int64_t rows, ld, classes;
  float scale;
  Tensor z, y, dz_gpu;  // host logits and labels; the GPU's gradient
  Tensor z_dev, y_dev;
  double cpu_loss = 0;
  Tensor cpu_dz;
  int64_t cpu_top1 = 0, cpu_top5 = 0;
};

class StepReadbackGpu : public GpuTest {
 protected:
  MicroBatch make(int64_t rows, int64_t ld, int64_t classes, float scale) {
    const int64_t k = classes > 0 ? classes : ld;
    MicroBatch m{rows, ld, classes, scale, Tensor::zeros({rows, ld}), Tensor::zeros({rows}, DType::I32), {}, {}, {}};
    const auto v = kernels::cuda::test::normal_floats(static_cast<size_t>(rows * ld), gen_, 2.0f);
    std::copy(v.begin(), v.end(), m.z.data<float>());
    for (int64_t r = 0; r < rows; ++r) m.y.data<int32_t>()[r] = static_cast<int32_t>(gen_() % static_cast<uint64_t>(k));
    return m;
  }
  // The CPU calls' results, then the tensors on the device.
  void upload(MicroBatch& m) {
    const int64_t k = m.classes > 0 ? m.classes : m.ld;
    m.cpu_dz = Tensor::zeros({m.rows, m.ld});
    if (std::isfinite(m.z.data<float>()[0]) && std::all_of(m.y.data<int32_t>(), m.y.data<int32_t>() + m.rows,
                                                            [&](int32_t l) { return l >= 0 && l < k; }))
      m.cpu_loss = loss_.forward_backward(m.z, m.y, &m.cpu_dz, m.classes);
    std::vector<int32_t> ranks(static_cast<size_t>(m.rows));
    kernels::cpu::label_ranks(m.z.data<float>(), m.y.data<int32_t>(), m.rows, k, 5, ranks.data(), m.ld);
    for (int32_t r : ranks) m.cpu_top1 += r < 1, m.cpu_top5 += r < 5;
    m.z_dev = Tensor::zeros({m.rows, m.ld}, DType::F32, dev_);
    m.y_dev = Tensor::zeros({m.rows}, DType::I32, dev_);
    m.dz_gpu = Tensor::zeros({m.rows, m.ld}, DType::F32, dev_);
    m.z_dev.copy_from(m.z);
    m.y_dev.copy_from(m.y);
  }
  // A step of these micro-batches through `rb`: its losses, gradients and hits against the CPU's.
  void expect_step_equals_cpu(StepReadback& rb, std::vector<MicroBatch>& step) {
    for (size_t i = 0; i < step.size(); ++i) {
      upload(step[i]);
      rb.enqueue(loss_, step[i].z_dev, step[i].y_dev, step[i].dz_gpu, step[i].scale, step[i].classes,
                 static_cast<int>(i));
    }
    int64_t top1 = 100, top5 = 200;  // read adds to them
    const std::vector<double> losses = rb.read(top1, top5);
    ASSERT_EQ(losses.size(), step.size());
    int64_t want1 = 100, want5 = 200;
    for (size_t i = 0; i < step.size(); ++i) {
      const MicroBatch& m = step[i];
      SCOPED_TRACE(testing::Message() << "micro-batch " << i << " rows " << m.rows << " ld " << m.ld);
      EXPECT_NEAR(losses[i], m.cpu_loss, 2e-5 * std::max(1.0, std::fabs(m.cpu_loss)));
      Tensor back = Tensor::zeros({m.rows, m.ld});
      back.copy_from(m.dz_gpu);
      for (int64_t j = 0; j < m.rows * m.ld; ++j)
        ASSERT_NEAR(back.data<float>()[j], m.scale * m.cpu_dz.data<float>()[j], 2e-5 * m.scale / m.rows) << j;
      want1 += m.cpu_top1, want5 += m.cpu_top5;
    }
    EXPECT_EQ(top1, want1);
    EXPECT_EQ(top5, want5);
  }
  const Device dev_ = Device::cuda(0);
  const models::SoftmaxCrossEntropy loss_{0.1};
};

DP_GPU_TEST_F(StepReadbackGpu, EachMicroBatchsLossGradientAndHitsEqualTheCpuCalls) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  StepReadback rb(s());
  // A first step: two micro-batches, the second smaller (an epoch's last).
  std::vector<MicroBatch> first{make(8, 10, 0, 0.5f), make(3, 10, 0, 0.25f)};
  expect_step_equals_cpu(rb, first);
  // A second step: more and larger micro-batches, padded rows (10 classes in rows of 16): every slot grows.
  std::vector<MicroBatch> second{make(40, 16, 10, 1.0f / 3), make(40, 16, 10, 1.0f / 3), make(40, 16, 10, 1.0f / 3),
                                 make(7, 16, 10, 1.0f)};
  expect_step_equals_cpu(rb, second);
  // A third, smaller again: the slots start over.
  std::vector<MicroBatch> third{make(5, 10, 0, 1.0f)};
  expect_step_equals_cpu(rb, third);
}

DP_GPU_TEST_F(StepReadbackGpu, ABadLabelIsNamedAndNaNLogitsGiveANaNLoss) {
  StepReadback rb(s());
  std::vector<MicroBatch> step{make(4, 10, 0, 1.0f), make(4, 10, 0, 1.0f)};
  step[0].z.data<float>()[0] = std::nanf("");  // NaN logits, labels in range: a NaN loss, no error
  step[1].y.data<int32_t>()[2] = 11;           // a label outside [0, 10) in the second micro-batch
  for (size_t i = 0; i < step.size(); ++i) {
    upload(step[i]);
    rb.enqueue(loss_, step[i].z_dev, step[i].y_dev, step[i].dz_gpu, 1.0f, 0, static_cast<int>(i));
  }
  int64_t top1 = 0, top5 = 0;
  try {
    rb.read(top1, top5);
    ADD_FAILURE() << "no error for label 11 of 10 classes";
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "softmax cross entropy: label 11 at batch index 2 is outside [0, 10) (the model has 10 "
                           "classes)");
  }
  step[1].y.data<int32_t>()[2] = 3;
  for (size_t i = 0; i < step.size(); ++i) {
    upload(step[i]);
    rb.enqueue(loss_, step[i].z_dev, step[i].y_dev, step[i].dz_gpu, 1.0f, 0, static_cast<int>(i));
  }
  const std::vector<double> losses = rb.read(top1, top5);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_TRUE(std::isnan(losses[0])) << losses[0];
  EXPECT_NEAR(losses[1], step[1].cpu_loss, 2e-5 * std::max(1.0, std::fabs(step[1].cpu_loss)));
}

DP_GPU_TEST_F(StepReadbackGpu, SlotsComeInOrder) {
  StepReadback rb(s());
  MicroBatch m = make(4, 10, 0, 1.0f);
  upload(m);
  EXPECT_THROW(rb.enqueue(loss_, m.z_dev, m.y_dev, m.dz_gpu, 1.0f, 0, 1), DpError);  // slot 1 before slot 0
  rb.enqueue(loss_, m.z_dev, m.y_dev, m.dz_gpu, 1.0f, 0, 0);
  EXPECT_THROW(rb.enqueue(loss_, m.z_dev, m.y_dev, m.dz_gpu, 1.0f, 0, 2), DpError);  // slot 2 after slot 0
}

}  // namespace
}  // namespace dp::launch
#else
TEST(StepReadback, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
