// ZeRO's in-place pair on the ring (Communicator::reduce_scatter_blocks_async and
// allgather_blocks_async): the rank's block after the reduce-scatter has exactly the bits the
// all-reduce leaves there, on the ring (large tensors) and recursive doubling (small: the backend
// then runs the all-reduce) alike, over shared memory and TCP; the all-gather assembles every block.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

// Values whose sums round differently in different groupings (a float sum of three or more).
float value(int rank, int64_t i) {
  const uint32_t h = static_cast<uint32_t>(i * 2654435761u + rank * 40503u);
  return (static_cast<float>(h % 100003) / 7.0f - 7000.0f) * (1.0f + 0.37f * static_cast<float>(rank));
}

int check_blocks(Communicator& c, int64_t count, std::string* why) {
  const int n = c.size(), r = c.rank();
  Tensor ref = Tensor::zeros({count}, DType::F32), mine = Tensor::zeros({count}, DType::F32);
  for (int64_t i = 0; i < count; ++i) ref.data<float>()[i] = mine.data<float>()[i] = value(r, i);
  c.allreduce(ref, ReduceOp::Avg);
  c.reduce_scatter_blocks_async(mine, ReduceOp::Avg)->wait();
  const ring::Block b = ring::ring_block(count, n, r);
  if (std::memcmp(ref.data<float>() + b.begin, mine.data<float>() + b.begin, b.len * sizeof(float)) != 0) {
    *why = fmt::format("rank {}: reduce_scatter_blocks of {} elements differs from the all-reduce's block", r, count);
    return 1;
  }
  // Only the own block is defined: spoil the others, then gather.
  for (int64_t i = 0; i < count; ++i)
    if (i < b.begin || i >= b.begin + b.len) mine.data<float>()[i] = -1.0f;
  c.allgather_blocks_async(mine)->wait();
  if (std::memcmp(ref.data<float>(), mine.data<float>(), count * sizeof(float)) != 0) {
    *why = fmt::format("rank {}: allgather_blocks of {} elements differs from the all-reduce", r, count);
    return 1;
  }
  return 0;
}

void blocks_on(int n) {
  auto results = ringtest::run_ranks(
      n,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        int failures = 0;
        for (bool shm : {true, false}) {
          RingOptions o;
          o.timeout_s = 30;
          o.piece_bytes = 1000;  // many pieces per block
          o.small_bytes = 256;   // 64 floats and below: recursive doubling
          if (!shm) o.shm_fifo_bytes = 0;
          auto c = make_ring_communicator(bs, o);
          for (int64_t count : {1, 5, 64, 65, 1000, 4099, 30011}) {
            std::string why;
            if (check_blocks(*c, count, &why)) {
              ringtest::report(s, r, why + (shm ? " (shm)\n" : " (tcp)\n"));
              ++failures;
            }
          }
        }
        return failures == 0 ? 0 : 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

TEST(RingBlocks, ReduceScatterBlocksIsTheAllreducesBlockBitwiseOn2Ranks) { blocks_on(2); }
TEST(RingBlocks, ReduceScatterBlocksIsTheAllreducesBlockBitwiseOn3Ranks) { blocks_on(3); }
TEST(RingBlocks, ReduceScatterBlocksIsTheAllreducesBlockBitwiseOn4Ranks) { blocks_on(4); }

}  // namespace
}  // namespace dp
