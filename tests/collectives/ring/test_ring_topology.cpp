// The pure pieces of the multi-host ring: RingTopology (nodes, leaders, the groups of the
// hierarchical all-reduce, naming ranks by host), rank_list, the choice of the listen address
// among interfaces, the desync hash, and the mismatch wording for gradient buckets.
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/ring/interfaces.h"
#include "collectives/ring/topology.h"
#include "collectives/communicator.h"
#include "collectives/ring/transport.h"

namespace dp::ring {
namespace {

// 8 ranks on 4 hosts, 2 each (srun -N4 -n8 on the hosts fixture).
RingTopology four_hosts(int rank) {
  return RingTopology(rank, {0, 0, 1, 1, 2, 2, 3, 3}, {"h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"});
}

TEST(RingTopology, GroupsNodesAndLeaders) {
  const RingTopology t = four_hosts(5);
  EXPECT_EQ(t.nodes(), 4);
  EXPECT_TRUE(t.hierarchical());
  EXPECT_TRUE(t.several_hosts());
  EXPECT_EQ(t.local().ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(t.local().me, 1);
  EXPECT_FALSE(t.leader());
  EXPECT_EQ(t.leaders().ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(t.leaders().me, -1);
  const RingTopology l = four_hosts(4);
  EXPECT_TRUE(l.leader());
  EXPECT_EQ(l.leaders().me, 2);
  EXPECT_EQ(l.node_of(7), 3);
  EXPECT_EQ(l.world().at(-1), 7);  // ring arithmetic on members
  EXPECT_EQ(l.world().at(8), 0);
}

TEST(RingTopology, NodesInTheOrderOfTheirLowestRankWhateverTheirIds) {
  // Node ids as a launcher may give them (not 0-based, not in rank order); ranks interleaved.
  const RingTopology t(3, {7, 3, 7, 3, 9}, {"b", "a", "b", "a", "c"});
  EXPECT_EQ(t.leaders().ranks, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(t.local().ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(t.local().me, 1);
  EXPECT_EQ(t.node_of(4), 2);
  EXPECT_TRUE(t.hierarchical());
}

TEST(RingTopology, HierarchicalOnlyWithSeveralNodesSomeWithSeveralRanks) {
  EXPECT_FALSE(RingTopology(0, {0, 0, 0, 0}, {"a", "a", "a", "a"}).hierarchical());  // one node
  EXPECT_FALSE(RingTopology(0, {0, 1, 2}, {"a", "b", "c"}).hierarchical());        // one rank per node
  EXPECT_TRUE(RingTopology(0, {0, 0, 1}, {"a", "a", "b"}).hierarchical());         // uneven is fine
  EXPECT_FALSE(RingTopology(0, {0}, {"a"}).hierarchical());
}

TEST(RingTopology, NamesRanksByHostOnlyWhenTheJobSpansSeveral) {
  const RingTopology t = four_hosts(0);
  EXPECT_EQ(t.name({4, 5}), "ranks 4-5 on host h3");
  EXPECT_EQ(t.name({5}), "rank 5 on host h3");
  EXPECT_EQ(t.name({7, 0, 1, 2, 3, 6}), "ranks 0-1 on host h1, ranks 2-3 on host h2, ranks 6-7 on host h4");
  EXPECT_EQ(t.name({1, 4}), "rank 1 on host h1, rank 4 on host h3");
  EXPECT_EQ(t.hosts_of({0, 1, 4}), 2);
  // Test nodes that share one machine's name (forked tests, the loopback Slurm fixture under
  // another name): the node ids still group, the messages leave the host out.
  const RingTopology one(0, {0, 0, 1, 1}, {"box", "box", "box", "box"});
  EXPECT_FALSE(one.several_hosts());
  EXPECT_TRUE(one.hierarchical());
  EXPECT_EQ(one.name({2, 3}), "ranks 2-3");
  EXPECT_EQ(one.name({3}), "rank 3");
}

TEST(RingTopology, RankListsUseRangesForRuns) {
  EXPECT_EQ(rank_list({2}), "rank 2");
  EXPECT_EQ(rank_list({5, 4}), "ranks 4-5");
  EXPECT_EQ(rank_list({0, 1, 2, 3, 6, 7, 9}), "ranks 0-3, 6-7, 9");
  EXPECT_EQ(rank_list({1, 1, 3}), "ranks 1, 3");
}

TEST(RingTopology, RejectsInconsistentInput) {
  EXPECT_THROW(RingTopology(2, {0, 0}, {"a", "a"}), DpError);
  EXPECT_THROW(RingTopology(0, {0, 0}, {"a"}), DpError);
}

TEST(ListenAddress, FirstUpInterfaceThatIsNotLoopbackBridgesLast) {
  const std::vector<NetInterface> ifs = {{"lo", "127.0.0.1", true, true},
                                         {"docker0", "172.17.0.1", true, false},
                                         {"eth1", "10.0.0.9", false, false},  // down
                                         {"eth0", "10.213.0.13", true, false}};
  EXPECT_EQ(pick_interface_address(ifs), "10.213.0.13");
  EXPECT_EQ(pick_interface_address({ifs[0], ifs[1]}), "172.17.0.1");  // a bridge rather than nothing
  EXPECT_EQ(pick_interface_address({ifs[0], ifs[2]}), "");
  EXPECT_EQ(pick_interface_address({{"weird", "127.0.1.1", true, false}}), "");  // loopback by address
  EXPECT_TRUE(is_loopback_ipv4("127.0.1.1"));
  EXPECT_FALSE(is_loopback_ipv4("10.213.0.1"));
}

CollectiveInfo allreduce_info(int64_t count, int32_t bucket) {
  CollectiveInfo i;
  i.kind = Kind::Allreduce;
  i.dtype = DType::F32;
  i.op = static_cast<uint8_t>(ReduceOp::Avg) + 1;
  i.algo = Algo::Hierarchical;
  i.count = count;
  i.bucket = bucket;
  return i;
}

TEST(DesyncHash, EveryFieldAndTheHistoryCount) {
  const uint64_t h = desync_hash(0, allreduce_info(100, 3));
  EXPECT_EQ(h, desync_hash(0, allreduce_info(100, 3)));         // a function of its inputs
  EXPECT_NE(h, desync_hash(0, allreduce_info(100, 4)));         // the bucket
  EXPECT_NE(h, desync_hash(0, allreduce_info(101, 3)));         // the count
  EXPECT_NE(h, desync_hash(1, allreduce_info(100, 3)));         // the history
  CollectiveInfo other = allreduce_info(100, 3);
  other.dtype = DType::BF16;
  EXPECT_NE(h, desync_hash(0, other));                          // the dtype
  other = allreduce_info(100, 3);
  other.op = static_cast<uint8_t>(ReduceOp::Sum) + 1;
  EXPECT_NE(h, desync_hash(0, other));                          // the reduction
  other = allreduce_info(100, 3);
  other.algo = Algo::Ring;
  other.seq = 99;
  EXPECT_EQ(h, desync_hash(0, other));                          // not the algorithm nor the number
  // Two histories that differ in order differ afterwards.
  EXPECT_NE(desync_hash(desync_hash(0, allreduce_info(10, 0)), allreduce_info(10, 1)),
            desync_hash(desync_hash(0, allreduce_info(10, 1)), allreduce_info(10, 0)));
}

TEST(DesyncHash, MismatchReasonNamesTheBucket) {
  const Signature a = signature_of(allreduce_info(100, 3)), b = signature_of(allreduce_info(100, 4));
  EXPECT_EQ(mismatch_reason(12, {{1, b}, {0, a}}),
            "rank 0 issued allreduce (f32, 100 elements, avg, bucket 3) as #12 while rank 1 issued allreduce (f32, 100 "
            "elements, avg, bucket 4): the gradient bucket differs; collectives must be issued in the same order, "
            "with the same dtype, size, op and root, on every rank");
}

}  // namespace
}  // namespace dp::ring
