// Tests for launch/device_input.h: the pure slot bookkeeping (SlotRing), slot layout and input
// geometry, which run everywhere; and DeviceInput end to end on a GPU (skipped without one):
// several epochs' batches in order with the CPU loader's values, labels and indices in every
// compute dtype and layout, a slot in use not overwritten before the compute stream releases
// it, and a submit refused when no slot is free.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "launch/device_input.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "base/half.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/data/token_dataset.h"
#include "runtime/data/token_shard.h"
#include "runtime/data/u8_dataset.h"
#include "runtime/device_memory.h"
#include "tests/gpu_test.h"
#endif

namespace dp::launch {
namespace {

TEST(SlotRing, FillsRoundRobinAndHandsOutInOrder) {
  SlotRing r(2);
  EXPECT_TRUE(r.can_submit());
  auto f0 = r.submit();
  EXPECT_EQ(f0.slot, 0);
  EXPECT_FALSE(f0.wait_copy);
  EXPECT_FALSE(f0.wait_release);
  auto f1 = r.submit();  // two pending before any next(): allowed, both slots busy now
  EXPECT_EQ(f1.slot, 1);
  EXPECT_EQ(r.pending(), 2);
  EXPECT_FALSE(r.can_submit());
  EXPECT_THROW(r.submit(), DpError);
  auto h0 = r.next();
  EXPECT_EQ(h0.slot, 0);
  EXPECT_EQ(h0.released, -1);
  EXPECT_EQ(r.in_use(), 0);
  EXPECT_FALSE(r.can_submit());  // slot 0 in use, slot 1 pending
  auto h1 = r.next();
  EXPECT_EQ(h1.slot, 1);
  EXPECT_EQ(h1.released, 0);  // slot 0 is released when slot 1 is handed out
  EXPECT_THROW(r.next(), DpError);
  ASSERT_TRUE(r.can_submit());
  auto f2 = r.submit();
  EXPECT_EQ(f2.slot, 0);
  EXPECT_TRUE(f2.wait_copy);
  EXPECT_TRUE(f2.wait_release);
}

// The trainer's rhythm: submit(k + 1) right after next() returned k.
TEST(SlotRing, SteadyStateAlternatesAndWaitsOnlyForSlotsUsedBefore) {
  for (int slots : {2, 3, 4}) {
    SCOPED_TRACE(slots);
    SlotRing r(slots);
    r.submit();
    int previous = -1;
    for (int k = 0; k < 20; ++k) {
      const auto h = r.next();
      EXPECT_EQ(h.slot, k % slots);
      EXPECT_EQ(h.released, previous);
      previous = h.slot;
      ASSERT_TRUE(r.can_submit());
      const auto f = r.submit();
      EXPECT_EQ(f.slot, (k + 1) % slots);
      EXPECT_NE(f.slot, h.slot);  // never the batch the compute stream is using
      EXPECT_EQ(f.wait_copy, k + 1 >= slots);
      EXPECT_EQ(f.wait_release, k + 1 >= slots);  // a slot used before was released before reuse
    }
  }
}

TEST(SlotRing, AtMostSlotsBusy) {
  SlotRing r(3);
  r.submit(), r.submit(), r.submit();
  EXPECT_THROW(r.submit(), DpError);
  r.next();
  EXPECT_FALSE(r.can_submit());  // 2 pending + 1 in use
  r.next();                      // releases the first
  EXPECT_TRUE(r.can_submit());
  EXPECT_EQ(r.submit().slot, 0);
  EXPECT_THROW(SlotRing(1), DpError);
}

TEST(SlotLayout, RegionsAreAlignedAndDisjoint) {
  for (int64_t mb : {1, 7, 64, 256})
    for (size_t row : {size_t{784}, size_t{3072}, size_t{3 * 32 * 32 * 4}, size_t{1}}) {
      const SlotLayout l = slot_layout(mb, row);
      EXPECT_EQ(l.y_offset, 0u);
      EXPECT_EQ(l.choice_offset % 256, 0u);
      EXPECT_EQ(l.raw_offset % 256, 0u);
      EXPECT_GE(l.choice_offset, static_cast<size_t>(mb) * 4);
      EXPECT_GE(l.raw_offset, l.choice_offset + static_cast<size_t>(mb) * 12);
      EXPECT_GE(l.bytes, l.raw_offset + static_cast<size_t>(mb) * row);
      EXPECT_LT(l.bytes, l.raw_offset + static_cast<size_t>(mb) * row + 256);
      EXPECT_EQ(l.upload_bytes(mb, row), l.raw_offset + static_cast<size_t>(mb) * row);
      EXPECT_EQ(l.upload_bytes(1, row), l.raw_offset + row);
    }
  EXPECT_THROW(slot_layout(0, 4), DpError);
}

TEST(InputGeometry, ImagesKeepTheirShapeOtherSamplesBecomeRows) {
  InputGeometry g = input_geometry({3, 32, 28}, true);
  EXPECT_EQ(g.channels, 3);
  EXPECT_EQ(g.height, 32);
  EXPECT_EQ(g.width, 28);
  EXPECT_TRUE(g.nhwc);
  EXPECT_FALSE(input_geometry({3, 32, 28}, false).nhwc);
  g = input_geometry({4, 10}, true);  // normalisation's channels are shape[0]
  EXPECT_EQ(g.channels, 4);
  EXPECT_EQ(g.height, 1);
  EXPECT_EQ(g.width, 10);
  EXPECT_FALSE(g.nhwc);  // not a 4-D batch: never channels last
  g = input_geometry({784}, false);
  EXPECT_EQ(g.channels, 784);
  EXPECT_EQ(g.width, 1);
  g = input_geometry({}, false);
  EXPECT_EQ(g.channels * g.height * g.width, 1);
  EXPECT_THROW(input_geometry({3, 0, 4}, false), DpError);
}

#ifdef DPTRAIN_HAVE_CUDA

const Shape kShape{3, 12, 10};
constexpr int kBatch = 8;

class DeviceInputGpu : public gputest::GpuFixture<> {
 protected:
  void GpuSetUp() override {
    gpu_ = std::make_unique<cuda::ExecContext>(0, size_t{16} << 20);
    std::mt19937 gen(3);
    const int64_t n = 50, numel = shape_numel(kShape);
    std::vector<uint8_t> px(static_cast<size_t>(n * numel)), labels(static_cast<size_t>(n));
    for (auto& p : px) p = static_cast<uint8_t>(gen());
    for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
    ds_ = std::make_unique<data::U8Dataset>(std::move(px), std::move(labels), kShape, 10, "test bytes");
    t_.crop_padding = 2;
    t_.hflip = true;
    t_.mean = {0.49f, 0.48f, 0.45f};
    t_.std = {0.25f, 0.24f, 0.26f};
  }

  std::vector<int64_t> order(uint64_t epoch) const {
    std::vector<int64_t> v(static_cast<size_t>(ds_->size()));
    for (int64_t i = 0; i < ds_->size(); ++i) v[i] = i;
    std::shuffle(v.begin(), v.end(), std::mt19937(static_cast<unsigned>(epoch)));
    return v;
  }

  // The bytes x of a CPU batch should have on the device: cast to `dtype`, NHWC when cl.
  static std::vector<unsigned char> expected_bytes(const Tensor& cpu_x, DType dtype, bool cl) {
    const int64_t B = cpu_x.dim(0), C = kShape[0], H = kShape[1], W = kShape[2];
    const float* x = cpu_x.data<float>();
    std::vector<unsigned char> out(static_cast<size_t>(cpu_x.numel()) * dtype_size(dtype));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t w = 0; w < W; ++w) {
            const float v = x[((b * C + c) * H + y) * W + w];
            const int64_t i = cl ? ((b * H + y) * W + w) * C + c : ((b * C + c) * H + y) * W + w;
            if (dtype == DType::F32) {
              std::memcpy(out.data() + i * 4, &v, 4);
            } else {
              const uint16_t h = dtype == DType::BF16 ? kernels::cpu::f32_to_bf16(v) : kernels::cpu::f32_to_f16(v);
              std::memcpy(out.data() + i * 2, &h, 2);
            }
          }
    return out;
  }

  // A device tensor's bytes, read on the compute stream (after what it waits for).
  std::vector<unsigned char> download(const Tensor& t) const {
    std::vector<unsigned char> out(t.nbytes());
    CHECK_CUDA(cudaMemcpyAsync(out.data(), t.raw(), out.size(), cudaMemcpyDeviceToHost, gpu_->compute()));
    CHECK_CUDA(cudaStreamSynchronize(gpu_->compute()));
    return out;
  }

  static std::vector<unsigned char> host_bytes(const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.raw());
    return {p, p + t.nbytes()};
  }

  std::unique_ptr<cuda::ExecContext> gpu_;
  std::unique_ptr<data::U8Dataset> ds_;
  data::Transform t_;
  const uint64_t seed_ = 77;
};

DP_GPU_TEST_F(DeviceInputGpu, EpochsOfBatchesEqualTheCpuLoaderInEveryDtypeAndLayout) {
  const struct {
    DType dtype;
    bool cl;
    int slots;
  } combos[] = {{DType::F32, false, 2}, {DType::BF16, true, 2}, {DType::F16, true, 3}, {DType::F32, true, 2}};
  for (const auto& k : combos) {
    SCOPED_TRACE(testing::Message() << dtype_name(k.dtype) << (k.cl ? " nhwc" : " nchw") << ", " << k.slots
                                    << " slots");
    DeviceInput in(*gpu_, t_, kShape, kBatch, k.dtype, k.cl, seed_, DType::U8, k.slots);
    int64_t batches = 0;
    for (uint64_t epoch = 4; epoch < 6; ++epoch) {
      data::Loader cpu(*ds_, order(epoch), kBatch, false, t_, seed_, epoch);
      data::Loader raw(*ds_, order(epoch), kBatch, false, t_, seed_, epoch, 2, data::BatchFormat::RawU8);
      data::Batch r, want;
      ASSERT_TRUE(raw.next(r));
      in.submit(r, epoch);
      for (int64_t b = 0; b < raw.num_batches(); ++b) {
        const DeviceInput::DeviceBatch got = in.next();
        if (raw.next(r)) in.submit(r, epoch);  // the trainer's rhythm: k + 1 right after next() gave k
        ASSERT_TRUE(cpu.next(want));
        ASSERT_EQ(got.size, want.x.dim(0));
        EXPECT_EQ(got.indices, want.indices);
        EXPECT_EQ(got.x.shape(), want.x.shape());
        EXPECT_EQ(got.x.dtype(), k.dtype);
        EXPECT_TRUE(got.x.device().is_cuda());
        EXPECT_EQ(download(got.y), host_bytes(want.y)) << "labels of batch " << b;
        ASSERT_EQ(download(got.x), expected_bytes(want.x, k.dtype, k.cl)) << "x of batch " << b;
        ++batches;
      }
      EXPECT_EQ(in.pending(), 0);
    }
    EXPECT_EQ(batches, 14);  // 2 epochs of 7 batches (the last of 2 rows)
  }
}

// Host function on the compute stream: holds it, as a long step would.
void CUDART_CB hold_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

DP_GPU_TEST_F(DeviceInputGpu, ASlotInUseIsNotOverwrittenBeforeItsRelease) {
  DeviceInput in(*gpu_, t_, kShape, kBatch, DType::F32, false, seed_, DType::U8, 2);
  data::Loader cpu(*ds_, order(1), kBatch, false, t_, seed_, 1);
  data::Loader raw(*ds_, order(1), kBatch, false, t_, seed_, 1, 2, data::BatchFormat::RawU8);
  std::vector<data::Batch> want(3);
  for (auto& w : want) ASSERT_TRUE(cpu.next(w));
  data::Batch r;
  ASSERT_TRUE(raw.next(r));
  in.submit(r, 1);
  const auto b0 = in.next();  // slot 0, in use
  // The "step" on batch 0: the compute stream is held 300 ms, then reads batch 0 (x and y).
  cuda::PinnedBuffer seen(b0.x.nbytes() + b0.y.nbytes());
  CHECK_CUDA(cudaLaunchHostFunc(gpu_->compute(), hold_stream, nullptr));
  CHECK_CUDA(cudaMemcpyAsync(seen.data(), b0.x.raw(), b0.x.nbytes(), cudaMemcpyDeviceToHost, gpu_->compute()));
  CHECK_CUDA(cudaMemcpyAsync(seen.as<unsigned char>() + b0.x.nbytes(), b0.y.raw(), b0.y.nbytes(),
                             cudaMemcpyDeviceToHost, gpu_->compute()));
  ASSERT_TRUE(raw.next(r));
  in.submit(r, 1);            // slot 1
  const auto b1 = in.next();  // releases slot 0 after the held step's reads
  ASSERT_TRUE(raw.next(r));
  in.submit(r, 1);  // slot 0 again: its copy and augmentation must wait for the release
  // All of this was queued without waiting for the held compute stream.
  CHECK_CUDA(cudaStreamSynchronize(gpu_->compute()));
  CHECK_CUDA(cudaStreamSynchronize(gpu_->data()));
  const auto* s = seen.as<unsigned char>();
  EXPECT_EQ(std::vector<unsigned char>(s, s + b0.x.nbytes()), expected_bytes(want[0].x, DType::F32, false))
      << "batch 0 was overwritten while the compute stream still used it";
  EXPECT_EQ(std::vector<unsigned char>(s + b0.x.nbytes(), s + b0.x.nbytes() + b0.y.nbytes()),
            host_bytes(want[0].y));
  EXPECT_EQ(download(b1.x), expected_bytes(want[1].x, DType::F32, false));
  const auto b2 = in.next();
  EXPECT_EQ(b2.indices, want[2].indices);
  EXPECT_EQ(download(b2.x), expected_bytes(want[2].x, DType::F32, false));
  EXPECT_EQ(download(b2.y), host_bytes(want[2].y));
}

DP_GPU_TEST_F(DeviceInputGpu, RefusesWhatDoesNotFit) {
  DeviceInput in(*gpu_, t_, kShape, kBatch, DType::BF16, true, seed_, DType::U8, 2);
  data::Loader raw(*ds_, order(0), kBatch, false, t_, seed_, 0, 2, data::BatchFormat::RawU8);
  data::Batch r;
  ASSERT_TRUE(raw.next(r));
  EXPECT_THROW(in.next(), DpError);  // nothing submitted
  in.submit(r, 0);
  in.submit(r, 0);
  EXPECT_FALSE(in.can_submit());
  EXPECT_THROW(in.submit(r, 0), DpError);  // both slots pending
  in.next();
  EXPECT_THROW(in.submit(r, 0), DpError);  // one in use, one pending
  in.next();
  EXPECT_TRUE(in.can_submit());
  // f32 raw samples do not fit slots sized for u8; a batch larger than max_batch is refused.
  data::Batch f = r;
  f.x = Tensor::zeros(r.x.shape(), DType::F32);
  EXPECT_THROW(in.submit(f, 0), DpError);
  data::Loader big(*ds_, order(0), kBatch + 1, false, t_, seed_, 0, 2, data::BatchFormat::RawU8);
  ASSERT_TRUE(big.next(r));
  EXPECT_THROW(in.submit(r, 0), DpError);
  EXPECT_THROW(DeviceInput(*gpu_, t_, kShape, kBatch, DType::I32, false, seed_), UserError);
  CHECK_CUDA(cudaStreamSynchronize(gpu_->compute()));
}

// Token windows: the windows' bytes uploaded in one copy and split on the device give the CPU
// loader's i32 inputs and targets (data::BatchFormat::Tokens), batch after batch.
class TokenInputGpu : public DeviceInputGpu {};

DP_GPU_TEST_F(TokenInputGpu, WindowsSplitOnTheDeviceEqualTheCpuLoadersInputsAndTargets) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("dp-token-input-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::vector<uint16_t> tokens(3001);
  std::mt19937 gen(5);
  for (auto& t : tokens) t = static_cast<uint16_t>(gen() % 50257);
  data::write_token_shard(dir + "/train_000000.bin", tokens);
  {
    const int64_t T = 64;
    auto ds = data::open_token_shards(dir + "/train_*.bin", {T, 50257, "data.path"});
    std::vector<int64_t> order(static_cast<size_t>(ds->size()));
    for (int64_t i = 0; i < ds->size(); ++i) order[i] = (i * 17) % ds->size();
    DeviceInput in(*gpu_, T, kBatch);
    data::Loader cpu(*ds, order, kBatch, false, data::Transform{}, 0, 0, 3, data::BatchFormat::Tokens);
    data::Loader raw(*ds, order, kBatch, false, data::Transform{}, 0, 0, 3, data::BatchFormat::RawTokens);
    data::Batch r, want;
    ASSERT_TRUE(raw.next(r));
    in.submit(r, 0);
    int64_t batches = 0;
    for (int64_t b = 0; b < raw.num_batches(); ++b) {
      const DeviceInput::DeviceBatch got = in.next();
      if (raw.next(r)) in.submit(r, 0);
      ASSERT_TRUE(cpu.next(want));
      ASSERT_EQ(got.size, want.x.dim(0));
      EXPECT_EQ(got.indices, want.indices);
      EXPECT_EQ(got.x.shape(), (Shape{want.x.dim(0), T}));
      EXPECT_EQ(got.x.dtype(), DType::I32);
      EXPECT_EQ(download(got.x), host_bytes(want.x)) << "inputs of batch " << b;
      EXPECT_EQ(download(got.y), host_bytes(want.y)) << "targets of batch " << b;
      ++batches;
    }
    EXPECT_EQ(batches, (ds->size() + kBatch - 1) / kBatch);
    // A batch that is not token windows of this block size is refused.
    data::Batch bad = want;
    bad.x = Tensor::zeros({2, 2 * (T + 2)}, DType::U8);
    bad.indices = {0, 1};
    EXPECT_THROW(in.submit(bad, 0), DpError);
    CHECK_CUDA(cudaStreamSynchronize(gpu_->compute()));
  }
  std::filesystem::remove_all(dir);
}

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp::launch
