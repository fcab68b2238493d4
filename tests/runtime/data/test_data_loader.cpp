// Tests for runtime/data/loader.h: order and coverage of batches, the last partial batch,
// contents equal to get() + apply_transform() whatever the batch size, error hand-over from
// the thread, and destruction mid-epoch without hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/data/u8_dataset.h"
#include "runtime/memory_account.h"

using dp::data::Batch;
using dp::data::Loader;
using dp::data::Transform;
using namespace std::chrono_literals;

namespace {

// Sample i is (C, H, W) = (2, 3, 3) filled with i + j / 100 (j = position); label i % 5.
class IndexDataset : public dp::data::Dataset {
 public:
  explicit IndexDataset(int64_t n, std::function<void(int64_t)> hook = nullptr) : n_(n), hook_(std::move(hook)) {}
  int64_t size() const override { return n_; }
  dp::Shape sample_shape() const override { return {2, 3, 3}; }
  int num_classes() const override { return 5; }
  int32_t get(int64_t index, float* out) const override {
    if (hook_) hook_(index);
    for (int j = 0; j < 18; ++j) out[j] = static_cast<float>(index) + static_cast<float>(j) / 100.0f;
    return static_cast<int32_t>(index % 5);
  }
  std::string describe() const override { return "index dataset"; }

 private:
  int64_t n_;
  std::function<void(int64_t)> hook_;
};

std::vector<Batch> drain(Loader& l) {
  std::vector<Batch> out;
  Batch b;
  while (l.next(b)) out.push_back(std::move(b));
  return out;
}

// Runs `f` on a thread; if it does not finish within `limit`, report and exit: a hang must
// fail the test, not stall the whole binary.
void within(std::chrono::milliseconds limit, const char* what, std::function<void()> f) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  std::thread([f = std::move(f), done] {
    f();
    done->set_value();
  }).detach();
  if (fut.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not finish within %lld ms\n", what, static_cast<long long>(limit.count()));
    std::_Exit(1);
  }
}

}  // namespace

TEST(DataLoader, BatchesCoverTheIndicesInOrder) {
  IndexDataset ds(50);
  std::vector<int64_t> idx = dp::data::sampler_permutation(50, 3, 0);
  idx.resize(23);
  for (bool drop : {false, true}) {
    Loader l(ds, idx, 5, drop, Transform{}, 0, 0, 2);
    EXPECT_EQ(l.num_batches(), drop ? 4 : 5);
    auto batches = drain(l);
    ASSERT_EQ(static_cast<int64_t>(batches.size()), l.num_batches());
    size_t pos = 0;
    for (size_t b = 0; b < batches.size(); ++b) {
      const Batch& batch = batches[b];
      const int64_t rows = (!drop && b == 4) ? 3 : 5;
      ASSERT_EQ(batch.x.shape(), (dp::Shape{rows, 2, 3, 3}));
      ASSERT_EQ(batch.x.dtype(), dp::DType::F32);
      ASSERT_EQ(batch.y.shape(), (dp::Shape{rows}));
      ASSERT_EQ(batch.y.dtype(), dp::DType::I32);
      ASSERT_EQ(static_cast<int64_t>(batch.indices.size()), rows);
      for (int64_t r = 0; r < rows; ++r, ++pos) {
        EXPECT_EQ(batch.indices[r], idx[pos]);
        EXPECT_EQ(batch.y.data<int32_t>()[r], idx[pos] % 5);
        EXPECT_EQ(batch.x.data<float>()[r * 18], static_cast<float>(idx[pos]));
        EXPECT_EQ(batch.x.data<float>()[r * 18 + 17], static_cast<float>(idx[pos]) + 0.17f);
      }
    }
    EXPECT_EQ(pos, drop ? 20u : 23u);
    Batch b;
    EXPECT_FALSE(l.next(b));  // stays at the end
  }
}

TEST(DataLoader, EmptyAndTooShortForOneBatch) {
  IndexDataset ds(10);
  Loader empty(ds, {}, 4, false, Transform{}, 0, 0);
  EXPECT_EQ(empty.num_batches(), 0);
  Batch b;
  EXPECT_FALSE(empty.next(b));
  Loader short_drop(ds, {1, 2, 3}, 4, true, Transform{}, 0, 0);
  EXPECT_EQ(short_drop.num_batches(), 0);
  EXPECT_FALSE(short_drop.next(b));
  Loader short_keep(ds, {1, 2, 3}, 4, false, Transform{}, 0, 0);
  ASSERT_TRUE(short_keep.next(b));
  EXPECT_EQ(b.x.dim(0), 3);
  EXPECT_FALSE(short_keep.next(b));
}

TEST(DataLoader, ContentsMatchTransformAndDoNotDependOnBatching) {
  IndexDataset ds(64);
  Transform t;
  t.mean = {0.5f, 1.5f};
  t.std = {2.0f, 4.0f};
  t.crop_padding = 1;
  t.hflip = true;
  std::vector<int64_t> idx = dp::data::sampler_indices(64, 2, 1, true, 7, 4, false);  // 32 indices
  auto collect = [&](int bs, int prefetch) {
    Loader l(ds, idx, bs, false, t, 7, 4, prefetch);
    std::vector<float> all;
    for (auto& b : drain(l)) all.insert(all.end(), b.x.data<float>(), b.x.data<float>() + b.x.numel());
    return all;
  };
  const std::vector<float> a = collect(4, 1), b = collect(7, 3), c = collect(32, 2);
  ASSERT_EQ(a.size(), 32u * 18);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0);
  std::vector<float> in(18), want(18);
  for (size_t r = 0; r < idx.size(); ++r) {
    ds.get(idx[r], in.data());
    dp::data::apply_transform(t, {2, 3, 3}, 7, 4, idx[r], in.data(), want.data());
    ASSERT_EQ(std::memcmp(a.data() + r * 18, want.data(), 18 * sizeof(float)), 0) << "row " << r;
  }
  // A different epoch augments differently.
  Loader other(ds, idx, 32, false, t, 7, 5);
  Batch ob;
  ASSERT_TRUE(other.next(ob));
  EXPECT_NE(std::memcmp(a.data(), ob.x.data<float>(), a.size() * sizeof(float)), 0);
}

TEST(DataLoader, NormalisationValues) {
  IndexDataset ds(4);
  Transform t;
  t.mean = {1.0f, 2.0f};
  t.std = {0.5f, 0.25f};
  Loader l(ds, {3}, 1, false, t, 0, 0);
  Batch b;
  ASSERT_TRUE(l.next(b));
  const float* x = b.x.data<float>();
  for (int j = 0; j < 18; ++j) {
    const float v = 3.0f + static_cast<float>(j) / 100.0f;
    EXPECT_EQ(x[j], j < 9 ? (v - 1.0f) / 0.5f : (v - 2.0f) / 0.25f) << j;
  }
  EXPECT_FLOAT_EQ(x[0], 4.0f);
  EXPECT_FLOAT_EQ(x[9], 4.36f);
}

TEST(DataLoader, ErrorInTheThreadIsRethrownFromNext) {
  IndexDataset ds(20, [](int64_t i) {
    if (i == 7) throw dp::UserError("sample 7 is unreadable");
  });
  std::vector<int64_t> idx(20);
  for (int i = 0; i < 20; ++i) idx[i] = i;
  Loader l(ds, idx, 4, false, Transform{}, 0, 0);
  Batch b;
  ASSERT_TRUE(l.next(b));  // indices 0..3 were fine
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2, 3}));
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      l.next(b);
      ADD_FAILURE() << "next() did not rethrow";
    } catch (const dp::UserError& e) {  // the original type, not a wrapper
      EXPECT_STREQ(e.what(), "sample 7 is unreadable");
    }
  }
}

TEST(DataLoader, BadArguments) {
  IndexDataset ds(10);
  try {
    Loader l(ds, {0, 10}, 2, false, Transform{}, 0, 0);
    ADD_FAILURE() << "no error for an index outside the dataset";
  } catch (const dp::UserError& e) {
    EXPECT_STREQ(e.what(), "loader index 10 (position 1) is outside the dataset index dataset, expected 0..9");
  }
  EXPECT_THROW(Loader(ds, {0}, 0, false, Transform{}, 0, 0), dp::UserError);
  EXPECT_THROW(Loader(ds, {0}, 1, false, Transform{}, 0, 0, 0), dp::UserError);
  Transform t;
  t.mean = {0.0f};
  t.std = {1.0f};
  EXPECT_THROW(Loader(ds, {0}, 1, false, t, 0, 0), dp::UserError);  // 1 mean for 2 channels
}

TEST(DataLoader, DestructionMidEpochDoesNotHang) {
  // Producer blocked on a full queue.
  IndexDataset fast(1000);
  std::vector<int64_t> idx(1000);
  for (int i = 0; i < 1000; ++i) idx[i] = i;
  within(5000ms, "~Loader with a full queue", [&] {
    Loader l(fast, idx, 10, false, Transform{}, 0, 0, 2);
    Batch b;
    EXPECT_TRUE(l.next(b));
    std::this_thread::sleep_for(50ms);  // let the queue fill
  });
  // Producer inside slow get() calls: it stops within the current sample, not the epoch.
  std::atomic<int64_t> calls{0};
  IndexDataset slow(1000, [&](int64_t) {
    calls++;
    std::this_thread::sleep_for(2ms);
  });
  const auto t0 = std::chrono::steady_clock::now();
  within(5000ms, "~Loader during slow reads", [&] {
    Loader l(slow, idx, 100, false, Transform{}, 0, 0, 2);
    std::this_thread::sleep_for(20ms);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);  // the epoch would take 2 s
  EXPECT_LT(calls.load(), 200);
  // Never consumed at all.
  within(5000ms, "~Loader never consumed", [&] { Loader l(fast, idx, 1, false, Transform{}, 0, 0, 1); });
}

TEST(DataLoader, WaitTimeIsMeasured) {
  std::vector<int64_t> idx = {0, 1, 2, 3};
  IndexDataset slow(4, [](int64_t) { std::this_thread::sleep_for(10ms); });
  Loader l(slow, idx, 4, false, Transform{}, 0, 0);
  Batch b;
  ASSERT_TRUE(l.next(b));
  EXPECT_GT(l.wait_seconds(), 0.02);  // 4 samples x 10 ms, mostly waited for
  EXPECT_LT(l.wait_seconds(), 2.0);
}

// data.workers: any number of threads gives the same batches, byte for byte (a row depends only on
// (seed, epoch, index)), for floats, bytes and transformed bytes; an error still comes after the
// batches before it.
TEST(DataLoader, WorkersGiveTheSameBatches) {
  std::vector<uint8_t> px(40 * 2 * 3 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 31 + 7);
  std::vector<uint8_t> labels(40);
  for (int i = 0; i < 40; ++i) labels[i] = static_cast<uint8_t>(i % 5);
  dp::data::U8Dataset bytes(px, labels, {2, 3, 3}, 5, "bytes");
  IndexDataset floats(40);
  std::vector<int64_t> idx(37);
  for (int i = 0; i < 37; ++i) idx[i] = (i * 11) % 40;
  Transform t;
  t.crop_padding = 1;
  t.hflip = true;
  t.mean = {0.5f, 0.25f};
  t.std = {0.5f, 2.0f};
  auto run = [&](const dp::data::Dataset& ds, dp::data::BatchFormat f, int workers) {
    Loader l(ds, idx, 8, false, t, 3, 1, 2, f, workers);
    std::vector<std::vector<uint8_t>> out;
    Batch b;
    while (l.next(b)) {
      const auto* p = static_cast<const uint8_t*>(b.x.raw());
      out.emplace_back(p, p + b.x.nbytes());
      const auto* y = static_cast<const uint8_t*>(b.y.raw());
      out.emplace_back(y, y + b.y.nbytes());
    }
    return out;
  };
  for (auto f : {dp::data::BatchFormat::Transformed, dp::data::BatchFormat::RawU8}) {
    const auto one = run(bytes, f, 1);
    ASSERT_EQ(one.size(), 10u);  // 5 batches (8, 8, 8, 8, 5), x and y each
    for (int w : {2, 3, 8}) EXPECT_EQ(run(bytes, f, w), one) << "workers " << w;
  }
  const auto one = run(floats, dp::data::BatchFormat::Transformed, 1);
  EXPECT_EQ(run(floats, dp::data::BatchFormat::Transformed, 4), one);
  // Transformed bytes are the transformed floats of get(): the byte path scales as get() does.
  Loader a(bytes, idx, 8, false, t, 3, 1, 2, dp::data::BatchFormat::Transformed, 3);
  Batch b;
  ASSERT_TRUE(a.next(b));
  std::vector<float> in(18), want(18);
  bytes.get(b.indices[2], in.data());
  dp::data::apply_transform(t, {2, 3, 3}, 3, 1, b.indices[2], in.data(), want.data());
  for (int j = 0; j < 18; ++j) EXPECT_EQ(b.x.data<float>()[2 * 18 + j], want[j]) << j;

  IndexDataset failing(20, [](int64_t i) {
    if (i == 7) throw dp::UserError("sample 7 is unreadable");
  });
  std::vector<int64_t> all(20);
  for (int i = 0; i < 20; ++i) all[i] = i;
  Loader l(failing, all, 4, false, Transform{}, 0, 0, 3, dp::data::BatchFormat::Transformed, 3);
  ASSERT_TRUE(l.next(b));
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_THROW(l.next(b), dp::UserError);
}

// The batches are charged to the account's input category (whichever thread holds them), each
// batch_bytes of its format: 11 rows of 18 floats in batches of 4 are two batches of 4 x 18 x 4 +
// 4 x 4 = 304 bytes and one of 3 x 18 x 4 + 3 x 4 = 228; freed with them. The depth is the
// prefetch raised to the workers.
TEST(DataLoader, BatchesAreChargedToInputAtBatchBytes) {
  using dp::MemoryCategory;
  using dp::data::BatchFormat;
  const auto input = [] { return dp::memory_breakdown().live[static_cast<size_t>(MemoryCategory::Input)]; };
  EXPECT_EQ(dp::data::batch_bytes(BatchFormat::Transformed, 18, 4), 304u);
  EXPECT_EQ(dp::data::batch_bytes(BatchFormat::RawF32, 18, 3), 228u);
  EXPECT_EQ(dp::data::batch_bytes(BatchFormat::RawU8, 18, 4), 4u * 18 + 4 * 4);
  EXPECT_EQ(dp::data::batch_bytes(BatchFormat::Tokens, 8, 2), 2u * 2 * 8 * 4);  // x and y i32 (2, 8)
  EXPECT_EQ(dp::data::batch_bytes(BatchFormat::RawTokens, 8, 2), 2u * 9 * 2);   // 9 uint16 a row
  EXPECT_EQ(dp::data::loader_depth(3, 1), 3);
  EXPECT_EQ(dp::data::loader_depth(3, 8), 8);
  IndexDataset ds(20);
  const size_t before = input();
  {
    std::vector<Batch> batches;
    {
      Loader l(ds, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4, false, Transform{}, 0, 0, 2);
      batches = drain(l);
    }
    ASSERT_EQ(batches.size(), 3u);
    for (const Batch& b : batches)
      EXPECT_EQ(b.x.nbytes() + b.y.nbytes(), dp::data::batch_bytes(BatchFormat::Transformed, 18, b.x.dim(0)));
    EXPECT_EQ(input() - before, 304u + 304u + 228u);
    EXPECT_EQ(dp::current_memory_category(), MemoryCategory::Other);  // the consumer's thread is untouched
  }
  EXPECT_EQ(input(), before);
}
