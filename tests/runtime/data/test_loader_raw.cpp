// Tests for the loader's raw batches (runtime/data/loader.h, BatchFormat::RawU8 / RawF32), the
// input of the GPU pipeline: same indices, labels and order as the transformed batches, x the
// dataset's own values (bytes or get()'s floats); and pack_augment_choices
// (runtime/data/transform.h). Together with the CPU twin (apply_transform) they give the CPU
// loader's batches byte for byte — what the device augmentation has to reproduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/data/u8_dataset.h"

namespace dp::data {
namespace {

const Shape kShape{3, 5, 7};

std::unique_ptr<U8Dataset> bytes_dataset(int64_t n) {
  std::mt19937 gen(11);
  std::vector<uint8_t> pixels(static_cast<size_t>(n * shape_numel(kShape))), labels(static_cast<size_t>(n));
  for (auto& p : pixels) p = static_cast<uint8_t>(gen());
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>((i * 7) % 4);
  return std::make_unique<U8Dataset>(std::move(pixels), std::move(labels), kShape, 4, "test bytes");
}

Transform training_transform() {
  Transform t;
  t.crop_padding = 2;
  t.hflip = true;
  t.mean = {0.5f, 0.25f, 0.125f};
  t.std = {0.25f, 0.3f, 2.0f};
  return t;
}

std::vector<int64_t> shuffled(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  std::shuffle(v.begin(), v.end(), std::mt19937(5));
  return v;
}

std::vector<Batch> drain(Loader& l) {
  std::vector<Batch> out;
  Batch b;
  while (l.next(b)) out.push_back(std::move(b));
  return out;
}

TEST(DataLoaderRaw, FormatFollowsTheDatasetsStorage) {
  EXPECT_EQ(raw_format_of(*bytes_dataset(3)), BatchFormat::RawU8);
  EXPECT_EQ(raw_format_of(*make_synthetic(3, kShape, 4, 1)), BatchFormat::RawF32);
}

TEST(DataLoaderRaw, RawU8NeedsADatasetOfBytes) {
  auto ds = make_synthetic(10, kShape, 4, 1);
  EXPECT_THROW(Loader(*ds, shuffled(10), 4, false, Transform{}, 1, 0, 2, BatchFormat::RawU8), UserError);
  // The transform is still checked against the samples: the device applies it.
  Transform bad;
  bad.mean = {0.5f};
  bad.std = {1.0f};
  auto bytes = bytes_dataset(10);
  EXPECT_THROW(Loader(*bytes, shuffled(10), 4, false, bad, 1, 0, 2, BatchFormat::RawU8), UserError);
}

TEST(DataLoaderRaw, PackedChoicesAreAugmentChoiceRowByRow) {
  const Transform t = training_transform();
  const std::vector<int64_t> idx = {0, 17, 3, 123456789, 5};
  std::vector<int32_t> packed(idx.size() * kPackedChoiceInts, -1);
  pack_augment_choices(t, 9, 4, idx.data(), static_cast<int64_t>(idx.size()), packed.data());
  for (size_t r = 0; r < idx.size(); ++r) {
    const AugmentChoice a = augment_choice(t, 9, 4, idx[r]);
    EXPECT_EQ(packed[r * 3 + 0], a.dy);
    EXPECT_EQ(packed[r * 3 + 1], a.dx);
    EXPECT_EQ(packed[r * 3 + 2], a.flip ? 1 : 0);
  }
  // No crop, no flip: all zeros.
  pack_augment_choices(Transform{}, 9, 4, idx.data(), static_cast<int64_t>(idx.size()), packed.data());
  for (int32_t v : packed) EXPECT_EQ(v, 0);
}

// Raw batches + packed choices + the CPU twin = the CPU loader's batches, byte for byte, for
// both raw formats, over a shuffled epoch with a last partial batch.
TEST(DataLoaderRaw, TwinOnRawBatchesEqualsTheCpuLoader) {
  const Transform t = training_transform();
  const uint64_t seed = 21, epoch = 3;
  const int64_t n = 23, numel = shape_numel(kShape);
  std::unique_ptr<Dataset> u8 = bytes_dataset(n);
  std::unique_ptr<Dataset> f32 = make_synthetic(n, kShape, 4, 8);
  for (const Dataset* ds : {u8.get(), f32.get()}) {
    const BatchFormat format = raw_format_of(*ds);
    SCOPED_TRACE(ds->describe());
    Loader cpu(*ds, shuffled(n), 4, false, t, seed, epoch);
    Loader raw(*ds, shuffled(n), 4, false, t, seed, epoch, 2, format);
    EXPECT_EQ(raw.num_batches(), cpu.num_batches());
    const auto want = drain(cpu), got = drain(raw);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.size(), 6u);
    std::vector<float> unit(static_cast<size_t>(numel)), out(static_cast<size_t>(numel)), direct(unit.size());
    for (size_t b = 0; b < got.size(); ++b) {
      const Batch &g = got[b], &w = want[b];
      const int64_t rows = w.x.dim(0);
      EXPECT_EQ(g.indices, w.indices);
      ASSERT_EQ(g.x.dtype(), format == BatchFormat::RawU8 ? DType::U8 : DType::F32);
      ASSERT_EQ(g.x.shape(), w.x.shape());
      EXPECT_EQ(g.x.nbytes() + g.y.nbytes(), batch_bytes(format, numel, rows));
      ASSERT_EQ(std::memcmp(g.y.raw(), w.y.raw(), w.y.nbytes()), 0) << "labels of batch " << b;
      std::vector<int32_t> packed(static_cast<size_t>(rows * kPackedChoiceInts));
      pack_augment_choices(t, seed, epoch, g.indices.data(), rows, packed.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t index = g.indices[r];
        // The raw row is the dataset's own sample...
        ds->get(index, direct.data());
        if (format == BatchFormat::RawU8) {
          const uint8_t* bytes = g.x.data<uint8_t>() + r * numel;
          ASSERT_EQ(std::memcmp(bytes, static_cast<const U8Dataset*>(ds)->raw(index), numel), 0);
          for (int64_t j = 0; j < numel; ++j) unit[j] = static_cast<float>(bytes[j]) / 255.0f;
        } else {
          std::memcpy(unit.data(), g.x.data<float>() + r * numel, numel * sizeof(float));
        }
        ASSERT_EQ(std::memcmp(unit.data(), direct.data(), numel * sizeof(float)), 0) << "sample " << index;
        // ...the packed row is its choice...
        const AugmentChoice a = augment_choice(t, seed, epoch, index);
        ASSERT_EQ(packed[r * 3 + 0], a.dy);
        ASSERT_EQ(packed[r * 3 + 1], a.dx);
        ASSERT_EQ(packed[r * 3 + 2], a.flip ? 1 : 0);
        // ...and the twin over both is the CPU loader's row.
        apply_transform(t, kShape, seed, epoch, index, unit.data(), out.data());
        ASSERT_EQ(std::memcmp(out.data(), w.x.data<float>() + r * numel, numel * sizeof(float)), 0)
            << "batch " << b << " row " << r;
      }
    }
  }
}

TEST(DataLoaderRaw, TransformedIsStillTheDefault) {
  auto ds = bytes_dataset(6);
  Loader l(*ds, shuffled(6), 6, false, training_transform(), 1, 0);
  const auto got = drain(l);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].x.dtype(), DType::F32);
}

}  // namespace
}  // namespace dp::data
