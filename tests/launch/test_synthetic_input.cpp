// Tests for launch/synthetic_input.h (data.synthetic_device = "cuda"): synthetic_spec is the
// generator open_datasets uses, images or, for a model that takes tokens, token windows (runs
// everywhere); on a GPU (SyntheticInputGpu, skipped without one) the batches SyntheticInput makes
// on the device equal, byte for byte, those the CPU loader and the input pipeline (DeviceInput)
// make of the same samples, in every compute dtype and layout, labels on the device and the host
// included; its token batches equal the CPU data set's windows split into inputs and targets;
// BatchFeed cuts the order into batches as the loader does; crop and flip are refused.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "tests/gpu_test.h"
#include "launch/datasets.h"
#include "runtime/config.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cstring>

#include "launch/batch_feed.h"
#include "launch/device_input.h"
#include "launch/synthetic_input.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/data/loader.h"
#include "runtime/device_memory.h"
#endif

namespace dp::launch {
namespace {

TEST(SyntheticSpec, IsTheGeneratorOfTheOpenedDataSet) {
  DataConfig d;
  d.dataset = data::DatasetKind::Synthetic;
  d.synthetic_shape = {3, 5, 7};
  d.synthetic_classes = 13;
  d.synthetic_train = 20;
  d.synthetic_eval = 4;
  d.mean = {0.5, 0.5, 0.5};
  d.std = {0.25, 0.25, 0.25};
  const SyntheticSpec s = synthetic_spec(d);
  EXPECT_EQ(s.shape, (Shape{3, 5, 7}));
  EXPECT_EQ(s.classes, 13);
  // The opened data set's samples are make_synthetic's with this seed: same labels and values.
  const Datasets ds = open_datasets(d);
  const auto twin = data::make_synthetic(24, s.shape, static_cast<int>(s.classes), s.seed);
  std::vector<float> a(105), b(105);
  for (int64_t i : {0, 7, 19, 20, 23}) {
    ASSERT_EQ(ds.train.dataset->get(i, a.data()), twin->get(i, b.data())) << i;
    EXPECT_EQ(a, b) << i;
  }
}

// For a model that takes tokens: make_synthetic_tokens' windows with the spec's seed, training
// the first data.synthetic_train (up to data.train_limit), evaluation the ones after them.
TEST(SyntheticSpec, TokenWindowsForAModelThatTakesTokens) {
  DataConfig d;
  d.dataset = data::DatasetKind::Synthetic;
  d.mean.clear(), d.std.clear();  // as config.cpp resolves them for token windows
  d.synthetic_train = 20, d.synthetic_eval = 6, d.eval_limit = 4;
  ModelConfig m;
  m.preset = PresetKind::Gpt2;
  m.block_size = 9, m.vocab_size = 300;
  const TokenWindows w = token_windows_of(m);
  EXPECT_TRUE(w.model_takes_tokens);
  const SyntheticSpec s = synthetic_spec(d, w);
  EXPECT_TRUE(s.tokens);
  EXPECT_EQ(s.block_size, 9);
  EXPECT_EQ(s.vocab, 300);
  EXPECT_FALSE(synthetic_spec(d).tokens);  // images by default
  const Datasets ds = open_datasets(d, "", w);
  ASSERT_TRUE(ds.tokens());
  EXPECT_EQ(ds.train.dataset->sample_shape(), (Shape{9}));
  EXPECT_EQ(ds.train.dataset->num_classes(), 300);
  EXPECT_EQ(ds.train.indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(ds.eval.indices, (std::vector<int64_t>{20, 21, 22, 23}));
  EXPECT_TRUE(data_classes(ds).empty());
  const auto twin = data::make_synthetic_tokens(26, 9, 300, s.seed);
  std::vector<uint16_t> a(10), b(10);
  for (int64_t i : {0, 19, 20, 25}) {
    ds.eval.dataset->get_tokens(i, a.data());
    twin->get_tokens(i, b.data());
    EXPECT_EQ(a, b) << i;
  }
  // Normalisation does not apply to token windows; the message names the data set kind.
  d.mean = {0.5}, d.std = {0.5};
  try {
    open_datasets(d, "", w);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows "
                           "(data.dataset = \"synthetic\" for a model that takes tokens); leave them out of the cfg");
  }
  // A model that takes images gets images: the same keys, the other generator.
  m.preset = PresetKind::Mlp;
  EXPECT_FALSE(token_windows_of(m).model_takes_tokens);
  d.mean = {0.5, 0.5, 0.5}, d.std = {0.5, 0.5, 0.5};
  EXPECT_FALSE(open_datasets(d, "", token_windows_of(m)).tokens());
}

#ifdef DPTRAIN_HAVE_CUDA

const Shape kShape{3, 12, 10};
constexpr int64_t kBatch = 8;

class SyntheticInputGpu : public ::dp::gputest::GpuFixture<> {
 protected:
  void GpuSetUp() override {
    gpu_ = std::make_unique<cuda::ExecContext>(0, size_t{16} << 20);
    spec_ = {kShape, 10, 12345};
    ds_ = data::make_synthetic(500, spec_.shape, static_cast<int>(spec_.classes), spec_.seed);
    t_.mean = {0.49f, 0.48f, 0.45f};
    t_.std = {0.25f, 0.24f, 0.26f};
    order_.resize(static_cast<size_t>(ds_->size()) - 3);  // 497 of 500: a last, shorter batch
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(), std::mt19937(7));
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
  SyntheticSpec spec_;
  std::unique_ptr<data::Dataset> ds_;
  data::Transform t_;
  std::vector<int64_t> order_;
};

DP_GPU_TEST_F(SyntheticInputGpu, BatchesEqualTheCpuLoaderThroughTheInputPipeline) {
  const struct {
    DType dtype;
    bool cl;
  } combos[] = {{DType::F32, false}, {DType::BF16, true}, {DType::F16, true}, {DType::BF16, false}};
  for (const auto& k : combos) {
    SCOPED_TRACE(testing::Message() << dtype_name(k.dtype) << (k.cl ? " nhwc" : " nchw"));
    DeviceInput pipeline(*gpu_, t_, kShape, kBatch, k.dtype, k.cl, 77, DType::F32, 2);
    SyntheticInput synth(*gpu_, spec_, t_, kBatch, k.dtype, k.cl);
    synth.set_order(order_);
    data::Loader raw(*ds_, order_, kBatch, false, t_, 77, 0, 2, data::BatchFormat::RawF32);
    data::Batch r;
    int64_t first = 0, batches = 0;
    while (raw.next(r)) {
      pipeline.submit(r, 0);
      const DeviceInput::DeviceBatch want = pipeline.next();
      const SyntheticInput::Batch got = synth.make(first, want.size);
      first += want.size;
      ASSERT_EQ(got.x.shape(), want.x.shape());
      EXPECT_EQ(got.x.dtype(), k.dtype);
      EXPECT_EQ(download(got.y), download(want.y)) << "device labels of batch " << batches;
      EXPECT_EQ(host_bytes(got.y_host), host_bytes(r.y)) << "host labels of batch " << batches;
      ASSERT_EQ(download(got.x), download(want.x)) << "x of batch " << batches;
      ++batches;
    }
    EXPECT_EQ(batches, 63);  // 62 of 8 and one of 1
    EXPECT_EQ(first, static_cast<int64_t>(order_.size()));
  }
}

DP_GPU_TEST_F(SyntheticInputGpu, BatchFeedCutsTheOrderAsTheLoaderDoes) {
  SyntheticInput synth(*gpu_, spec_, t_, kBatch, DType::BF16, true);
  for (bool drop_last : {false, true}) {
    BatchFeed feed(order_, kBatch, drop_last, &synth);
    data::Loader cpu(*ds_, order_, kBatch, drop_last, t_, 77, 0);
    BatchFeed::Item item;
    data::Batch want;
    int64_t batches = 0;
    while (feed.next(item)) {
      ASSERT_TRUE(cpu.next(want));
      EXPECT_EQ(item.n, want.x.dim(0));
      EXPECT_EQ(host_bytes(item.y_host), host_bytes(want.y));
      EXPECT_TRUE(item.x.device().is_cuda() && item.y.device().is_cuda());
      ++batches;
    }
    EXPECT_FALSE(cpu.next(want));
    EXPECT_EQ(batches, drop_last ? 62 : 63);
    EXPECT_EQ(feed.wait_seconds(), 0.0);  // no loader
  }
}

// Token windows for a model that takes tokens: x i32 (B, T) = each window's first T tokens, y i32
// (B, T) its last T, on the device, equal to the CPU data set's windows in every compute dtype (the
// ids do not depend on it); no host labels; normalisation refused.
DP_GPU_TEST_F(SyntheticInputGpu, TokenBatchesEqualTheCpuWindows) {
  constexpr int64_t kT = 24;
  SyntheticSpec spec{{}, 0, 4242};
  spec.tokens = true, spec.block_size = kT, spec.vocab = 50257;
  const auto ds = data::make_synthetic_tokens(500, kT, spec.vocab, spec.seed);
  std::vector<uint16_t> w(kT + 1);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    SyntheticInput synth(*gpu_, spec, data::Transform{}, kBatch, dt, true);
    BatchFeed feed(order_, kBatch, false, &synth);
    BatchFeed::Item item;
    int64_t first = 0, batches = 0;
    while (feed.next(item)) {
      ASSERT_EQ(item.x.shape(), (Shape{item.n, kT}));
      ASSERT_EQ(item.y.shape(), (Shape{item.n, kT}));
      EXPECT_EQ(item.x.dtype(), DType::I32);
      EXPECT_EQ(item.y.dtype(), DType::I32);
      EXPECT_TRUE(item.x.device().is_cuda() && item.y.device().is_cuda());
      EXPECT_FALSE(item.y_host.defined());
      std::vector<int32_t> want_x, want_y;
      for (int64_t r = 0; r < item.n; ++r) {
        ds->get_tokens(order_[static_cast<size_t>(first + r)], w.data());
        want_x.insert(want_x.end(), w.begin(), w.end() - 1);
        want_y.insert(want_y.end(), w.begin() + 1, w.end());
      }
      const auto bytes = [](const std::vector<int32_t>& v) {
        const auto* p = reinterpret_cast<const unsigned char*>(v.data());
        return std::vector<unsigned char>(p, p + v.size() * sizeof(int32_t));
      };
      ASSERT_EQ(download(item.x), bytes(want_x)) << "x of batch " << batches;
      ASSERT_EQ(download(item.y), bytes(want_y)) << "y of batch " << batches;
      first += item.n;
      ++batches;
    }
    EXPECT_EQ(batches, 63);  // 62 of 8 and one of 1
    EXPECT_EQ(first, static_cast<int64_t>(order_.size()));
  }
  EXPECT_THROW((SyntheticInput(*gpu_, spec, t_, kBatch, DType::F32, false)), UserError);  // t_ normalises
}

DP_GPU_TEST_F(SyntheticInputGpu, RefusesAugmentationAndRowsOutsideTheOrder) {
  data::Transform crop = t_;
  crop.crop_padding = 2;
  EXPECT_THROW((SyntheticInput(*gpu_, spec_, crop, kBatch, DType::F32, false)), UserError);
  data::Transform flip = t_;
  flip.hflip = true;
  EXPECT_THROW((SyntheticInput(*gpu_, spec_, flip, kBatch, DType::F32, false)), UserError);
  SyntheticInput synth(*gpu_, spec_, t_, kBatch, DType::F32, false);
  synth.set_order({1, 2, 3});
  EXPECT_THROW(synth.make(2, 2), DpError);  // past the order's end
  EXPECT_THROW(synth.make(0, kBatch + 1), DpError);
  EXPECT_THROW(synth.set_order({-1}), DpError);
}

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp::launch
