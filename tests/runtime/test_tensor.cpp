// Tensor, Storage and Arena: ownership, views and their bounds.
#include <gtest/gtest.h>

#include "runtime/arena.h"
#include "runtime/tensor.h"

namespace dp {
namespace {

TEST(Tensor, ZerosOwnsZeroFilledStorage) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u) << "64-byte aligned";
  EXPECT_EQ(t.describe(), "f32[2, 3] on cpu");
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(Tensor::zeros({4}, DType::I64).nbytes(), 32u);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::zeros({4, 3});
  Tensor r = t.reshape({12});
  Tensor row = t.narrow0(2, 1);
  row.data<float>()[1] = 5.0f;
  EXPECT_EQ(t.data<float>()[7], 5.0f);
  EXPECT_EQ(r.data<float>()[7], 5.0f);
  Tensor c = t.clone();
  c.data<float>()[7] = 1.0f;
  EXPECT_EQ(t.data<float>()[7], 5.0f) << "clone owns its data";
}

TEST(Tensor, BoundsAndTypesAreChecked) {
  Tensor t = Tensor::zeros({4});
  EXPECT_THROW(t.slice_flat(2, {3}), DpError);
  EXPECT_THROW(t.reshape({5}), DpError);
  EXPECT_THROW(t.data<double>(), DpError);
  try {
    t.data<int32_t>();
    FAIL();
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor is f32[4] on cpu, accessed as i32"), std::string::npos) << e.what();
  }
}

// ensure_capacity (a GPU layer's and graph's own buffers): a smaller batch is a view of the
// largest one's storage, values as they are, and so is a larger one within it; only a shape beyond
// the storage, another dtype or device allocates (a new, zero-filled storage). ensure_tensor
// allocates at every change of shape.
TEST(Tensor, EnsureCapacityKeepsTheLargestStorageForSmallerShapes) {
  Tensor t;
  ensure_capacity(t, {8, 3}, DType::F32, Device::cpu());
  const std::shared_ptr<Storage> first = t.storage();
  t.data<float>()[4] = 7.0f;
  ensure_capacity(t, {5, 3}, DType::F32, Device::cpu());  // the last partial batch
  EXPECT_EQ(t.storage(), first);
  EXPECT_EQ(t.shape(), (Shape{5, 3}));
  EXPECT_EQ(t.data<float>()[4], 7.0f);
  ensure_capacity(t, {8, 3}, DType::F32, Device::cpu());  // the next full one: the same bytes
  EXPECT_EQ(t.storage(), first);
  EXPECT_EQ(t.shape(), (Shape{8, 3}));
  ensure_capacity(t, {2, 12}, DType::F32, Device::cpu());  // another shape of no more bytes
  EXPECT_EQ(t.storage(), first);
  ensure_capacity(t, {9, 3}, DType::F32, Device::cpu());  // larger: a new storage, zeros
  EXPECT_NE(t.storage(), first);
  EXPECT_EQ(t.data<float>()[4], 0.0f);
  const std::shared_ptr<Storage> second = t.storage();
  ensure_capacity(t, {9, 3}, DType::BF16, Device::cpu());  // another dtype
  EXPECT_NE(t.storage(), second);
  Tensor u = Tensor::zeros({8, 3});
  const std::shared_ptr<Storage> own = u.storage();
  ensure_tensor(u, {5, 3});
  EXPECT_NE(u.storage(), own);
}

TEST(Arena, SlotsArePackedViews) {
  Arena a;
  EXPECT_EQ(a.add("w", {2, 3}), 0);
  EXPECT_EQ(a.add("b", {3}), 1);
  a.allocate(DType::F32, Device::cpu());
  EXPECT_EQ(a.numel(), 9);
  a.tensor(1).data<float>()[0] = 2.0f;
  EXPECT_EQ(a.flat().data<float>()[6], 2.0f);
  Arena g = a.like(DType::F32, Device::cpu());
  EXPECT_EQ(g.slot(1).offset, 6);
  EXPECT_EQ(g.flat().data<float>()[6], 0.0f) << "same layout, own storage";
  EXPECT_THROW(a.add("late", {1}), DpError);
}

}  // namespace
}  // namespace dp
