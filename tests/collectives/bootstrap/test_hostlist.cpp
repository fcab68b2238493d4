// Slurm's hostlist and tasks-per-node syntaxes (pure functions).
#include <gtest/gtest.h>

#include "collectives/bootstrap/hostlist.h"
#include "base/error.h"

namespace dp {
namespace {

using V = std::vector<std::string>;

std::string error_of(const std::string& list) {
  try {
    expand_hostlist(list);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Hostlist, PlainNamesAndSingleHost) {
  EXPECT_EQ(expand_hostlist("node1"), V{"node1"});
  EXPECT_EQ(expand_hostlist("a,b,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(expand_hostlist(""), V{});
  EXPECT_EQ(expand_hostlist("127.0.0.1"), V{"127.0.0.1"});
}

TEST(Hostlist, RangesWithCommasInsideBrackets) {
  EXPECT_EQ(expand_hostlist("gpu[01-03,07],cpu5"), (V{"gpu01", "gpu02", "gpu03", "gpu07", "cpu5"}));
  EXPECT_EQ(expand_hostlist("n[1-3]"), (V{"n1", "n2", "n3"}));
  EXPECT_EQ(expand_hostlist("n[5]"), V{"n5"});
  EXPECT_EQ(expand_hostlist("a[1,3],b[2-3,5],c"), (V{"a1", "a3", "b2", "b3", "b5", "c"}));
}

TEST(Hostlist, ZeroPaddingFollowsTheLowBound) {
  EXPECT_EQ(expand_hostlist("n[08-11]"), (V{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[8-11]"), (V{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (V{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("n[0-2]"), (V{"n0", "n1", "n2"}));
}

TEST(Hostlist, SuffixesAndSeveralBrackets) {
  EXPECT_EQ(expand_hostlist("n[1-2]-ib"), (V{"n1-ib", "n2-ib"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[01-02]"), (V{"r1n01", "r1n02", "r2n01", "r2n02"}));
  EXPECT_EQ(expand_hostlist("x[1-2]y,z"), (V{"x1y", "x2y", "z"}));
  EXPECT_EQ(expand_hostlist("a b\tc[1-2]"), (V{"a", "b", "c1", "c2"}));
}

TEST(Hostlist, MalformedListsAreNamed) {
  EXPECT_EQ(error_of("gpu[01-03"), "hostlist 'gpu[01-03': '[' without ']'");
  EXPECT_EQ(error_of("gpu01]"), "hostlist 'gpu01]': ']' without '['");
  EXPECT_EQ(error_of("n[3-1]"), "hostlist 'n[3-1]': range '3-1' goes backwards");
  EXPECT_EQ(error_of("n[a-b]"), "hostlist 'n[a-b]': 'a-b' in [a-b] is not a number or a range lo-hi");
  EXPECT_EQ(error_of("n[1,]"), "hostlist 'n[1,]': '' in [1,] is not a number or a range lo-hi");
  EXPECT_EQ(error_of("n[[1]]"), "hostlist 'n[[1]]': nested '['");
  EXPECT_EQ(error_of("n[0-99999999]"), "hostlist 'n[0-99999999]': range '0-99999999' is too large");
  EXPECT_EQ(error_of("a[0-999]b[0-9999]"), "hostlist 'a[0-999]b[0-9999]': more than 1000000 hosts");
}

TEST(TasksPerNode, Expands) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)"), (std::vector<int>{1, 3, 3}));
  try {
    expand_tasks_per_node("2(x)");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "SLURM_TASKS_PER_NODE '2(x)': '2(x)' is not N or N(xR)");
  }
}

}  // namespace
}  // namespace dp
