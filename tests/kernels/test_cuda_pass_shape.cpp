// kernels/cuda/pass_shape.h (pure: the split of an element-wise pass into a scalar head, 16-byte
// vectors and a scalar tail from its pointers' alignments, and the grid from the SM count) and
// kernels/cuda/sm_count.h (the device's SM count, read once: on the emulator its 132, on a GPU
// the device's own).
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/gpu_test.h"
#include "kernels/cuda/pass_shape.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/sm_count.h"
#include "runtime/device_memory.h"
#endif

namespace dp::kernels::cuda {
namespace {

// An address `offset` bytes past a 256-byte boundary (never dereferenced).
const void* at(uintptr_t offset) { return reinterpret_cast<const void*>(uintptr_t{0x10000} + offset); }

void expect_split(const VecSplit& s, int64_t head, int64_t vectors, int width, int64_t n) {
  EXPECT_EQ(s.head, head);
  EXPECT_EQ(s.vectors, vectors);
  EXPECT_EQ(s.width, width);
  EXPECT_EQ(s.head + s.vectors * s.width + s.tail(n), n);
  EXPECT_GE(s.tail(n), 0);
}

TEST(CudaPassShape, VectorWidthIsSixteenBytesOfTheWidestElement) {
  EXPECT_EQ(vec_width(4), 4);  // f32 (and an f32 + 16-bit pass)
  EXPECT_EQ(vec_width(2), 8);  // bf16 / f16 only
  EXPECT_EQ(vec_width(1), 16);
  EXPECT_EQ(vec_width(8), 2);
  EXPECT_EQ(vec_width(0), 1);   // nonsense sizes: scalar
  EXPECT_EQ(vec_width(32), 1);
}

TEST(CudaPassShape, AlignedPointersVectoriseEverythingButTheRemainder) {
  expect_split(vec_split(1000, 4, 4, {at(0), at(256)}), 0, 250, 4, 1000);
  expect_split(vec_split(1003, 4, 4, {at(0), at(256)}), 0, 250, 4, 1003);  // tail of 3
  expect_split(vec_split(3, 4, 4, {at(0)}), 0, 0, 4, 3);                    // shorter than a vector
  expect_split(vec_split(1001, 8, 2, {at(16), at(32)}), 0, 125, 8, 1001);
}

TEST(CudaPassShape, ACommonMisalignmentBecomesAScalarHead) {
  // f32 at 4 bytes past a boundary: 3 elements to the next 16-byte one, for every operand alike.
  expect_split(vec_split(1000, 4, 4, {at(4), at(1024 + 4)}), 3, 249, 4, 1000);
  expect_split(vec_split(1000, 4, 4, {at(8)}), 2, 249, 4, 1000);
  expect_split(vec_split(1000, 4, 4, {at(12)}), 1, 249, 4, 1000);
  // 16-bit at 2 bytes past: 7 to the boundary.
  expect_split(vec_split(100, 8, 2, {at(2), at(18)}), 7, 11, 8, 100);
  // Fewer elements than the head: all scalar head.
  expect_split(vec_split(2, 4, 4, {at(4)}), 2, 0, 4, 2);
  // A mixed-width pass (f32 + 16-bit, the arenas' same layout): the same element phase.
  expect_split(vec_split(100, 4, {{at(4 * 5), 4}, {at(2 * 5), 2}}), 3, 24, 4, 100);
}

TEST(CudaPassShape, DifferentPhasesOrOddAddressesFallBackToScalar) {
  expect_split(vec_split(1000, 4, 4, {at(0), at(4)}), 0, 0, 4, 1000);      // phases 0 and 1
  expect_split(vec_split(1000, 4, {{at(4), 4}, {at(4), 2}}), 0, 0, 4, 1000);  // f32 phase 1, u16 phase 2
  expect_split(vec_split(1000, 4, 4, {at(2)}), 0, 0, 4, 1000);             // an f32 pointer off its size
  expect_split(vec_split(1000, 8, 2, {at(1)}), 0, 0, 8, 1000);
  expect_split(vec_split(1000, 1, 4, {at(0)}), 0, 0, 1, 1000);             // width 1: scalar
  expect_split(vec_split(0, 4, 4, {at(0)}), 0, 0, 4, 0);
}

TEST(CudaPassShape, NullOperandsAreOptionalAndIgnored) {
  expect_split(vec_split(100, 4, {{at(4), 4}, {nullptr, 4}, {nullptr, 2}}), 3, 24, 4, 100);
  expect_split(vec_split(100, 4, 4, {nullptr}), 0, 0, 4, 100);  // nothing to align: scalar
}

TEST(CudaPassShape, GridIsOneIterationPerThreadUpToAFullWaveOfTheSms) {
  EXPECT_EQ(pass_blocks(0, 132), 1u);
  EXPECT_EQ(pass_blocks(1, 132), 1u);
  EXPECT_EQ(pass_blocks(256, 132), 1u);
  EXPECT_EQ(pass_blocks(257, 132), 2u);
  EXPECT_EQ(pass_blocks(int64_t{1} << 40, 132), 132u * kBlocksPerSm);  // an H100: 1056 blocks
  EXPECT_EQ(pass_blocks(int64_t{1} << 40, 78), 78u * kBlocksPerSm);
  EXPECT_EQ(pass_blocks(int64_t{1} << 40, 0), unsigned{kBlocksPerSm});  // unknown SMs: still a grid
  EXPECT_EQ(pass_blocks(1000, 132, 128), 8u);
  // The loop's iterations: one per vector and per scalar element.
  VecSplit s;
  s.head = 3, s.vectors = 10, s.width = 4;
  EXPECT_EQ(s.items(45), 10 + 5);
}

#ifdef DPTRAIN_HAVE_CUDA
DP_GPU_TEST(CudaPassShapeGpu, SmCountIsTheDevicesOwn) {
  int want = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&want, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(sm_count(), want);
  EXPECT_EQ(sm_count(), want);  // cached
#if defined(DP_CUDA_EMU)
  EXPECT_EQ(want, 132);  // the emulator reports an H100's count
#endif
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
