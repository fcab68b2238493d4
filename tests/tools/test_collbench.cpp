// tools/collbench, run as built (DPTRAIN_BINARY_DIR) with --nproc 2 and 3 over a few small sizes:
// exit status, the header and the table's columns, busbw = algbw x the op's bus factor for the
// printed numbers (within print rounding), and max error 0 (the inputs are small integers, so
// every result is exact).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/bytes.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct BenchRun {
  int code = -1;
  std::string out, err;
};

BenchRun collbench(const std::string& args) {
  const std::string bin = std::string(DPTRAIN_BINARY_DIR) + "/collbench";
  if (!fs::exists(bin)) ADD_FAILURE() << bin << " is not built (ninja collbench)";
  const std::string base = (fs::temp_directory_path() / ("dptrain_collbench_" + std::to_string(::getpid()))).string();
  const std::string out = base + ".out", err = base + ".err";
  // The launcher's variables of an enclosing job would make collbench a worker of it.
  const std::string cmd = "env -u RANK -u WORLD_SIZE -u PMIX_RANK -u PMI_FD -u PMI_RANK -u SLURM_PROCID " + bin + " " +
                          args + " >" + out + " 2>" + err;
  BenchRun r;
  const int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = dp::test::file_bytes(out);
  r.err = dp::test::file_bytes(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

struct Row {
  double size = 0, count = 0, time_us = 0, algbw = 0, busbw = 0;
  std::string type, redop, max_err;
};
struct Table {
  std::string op;
  std::vector<Row> rows;
};

// Rank 0's lines (the launcher prefixes "[rank 0] "); a table starts at "# <op> ..." followed by
// the column header, then one row per size.
std::vector<Table> parse(const std::string& out, std::string* header) {
  std::vector<Table> tables;
  std::istringstream in(out);
  const std::string prefix = "[rank 0] ";
  std::string pending_op;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[rank ", 0) == 0) {
      if (line.rfind(prefix, 0) != 0) continue;  // other ranks print nothing but errors
      line = line.substr(prefix.size());
    }
    if (line.rfind("# collbench: backend", 0) == 0) *header = line;
    if (line.rfind("#", 0) == 0) {
      std::istringstream w(line.substr(1));
      std::string first;
      w >> first;
      while (!first.empty() && (first.back() == ',' || first.back() == ':')) first.pop_back();
      for (const char* op :
           {"allreduce", "broadcast", "allgather", "reduce_scatter", "reduce_scatter_blocks", "allgather_blocks"})
        if (first == op) pending_op = op;
      if (first == "size(B)") {
        std::vector<std::string> cols;
        for (std::string c; w >> c;) cols.push_back(c);
        EXPECT_THAT(cols, ::testing::ElementsAre("count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                                                 "max_err"));
        tables.push_back({pending_op, {}});
      }
      continue;
    }
    if (line.empty() || tables.empty()) continue;
    std::istringstream w(line);
    Row r;
    w >> r.size >> r.count >> r.type >> r.redop >> r.time_us >> r.algbw >> r.busbw >> r.max_err;
    EXPECT_TRUE(static_cast<bool>(w)) << "malformed row: " << line;
    std::string extra;
    EXPECT_FALSE(static_cast<bool>(w >> extra)) << "extra column in: " << line;
    tables.back().rows.push_back(r);
  }
  return tables;
}

double bus_factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1;
  return static_cast<double>(n - 1) / n;
}

void check(int n, const std::string& dtype, int esize) {
  const BenchRun r = collbench("--nproc " + std::to_string(n) + " --op all --dtype " + dtype +
                          " --min-bytes 4 --max-bytes 4K --factor 4 --iters 3 --warmup 1 --timeout 20");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string header;
  const std::vector<Table> tables = parse(r.out, &header);
  EXPECT_THAT(header, HasSubstr("backend ring"));
  EXPECT_THAT(header, HasSubstr("world size " + std::to_string(n)));
  EXPECT_THAT(header, HasSubstr("host "));
  EXPECT_THAT(r.out, HasSubstr("# collbench: OK"));
  ASSERT_EQ(tables.size(), 6u) << r.out;
  const std::vector<std::string> ops = {"allreduce",      "broadcast",           "allgather",
                                        "reduce_scatter", "reduce_scatter_blocks", "allgather_blocks"};
  for (size_t t = 0; t < tables.size(); ++t) {
    const Table& tab = tables[t];
    SCOPED_TRACE(tab.op);
    EXPECT_EQ(tab.op, ops[t]);
    const bool per_rank = tab.op == "allgather" || tab.op == "reduce_scatter";
    // Sizes 4, 16, ..., 4096, rounded down to whole elements (x n for allgather and
    // reduce_scatter; the blocks pair sizes its whole in-place buffer); sizes holding no element
    // (per rank) are left out.
    std::vector<double> want_sizes;
    for (int b = 4; b <= 4096; b *= 4) {
      const int unit = esize * (per_rank ? n : 1);
      const int s = b / unit * unit;
      if (s > 0 && (want_sizes.empty() || want_sizes.back() != s)) want_sizes.push_back(s);
    }
    ASSERT_EQ(tab.rows.size(), want_sizes.size());
    for (size_t i = 0; i < tab.rows.size(); ++i) {
      const Row& row = tab.rows[i];
      EXPECT_EQ(row.size, want_sizes[i]);
      EXPECT_EQ(row.count * esize, row.size);
      EXPECT_EQ(row.type, dtype);
      EXPECT_EQ(row.redop, tab.op.rfind("allreduce", 0) == 0 || tab.op.rfind("reduce_scatter", 0) == 0 ? "sum" : "-");
      EXPECT_GT(row.time_us, 0);
      // algbw = size / time (time printed to 0.01 us, algbw to 1e-4 GB/s).
      const double t_lo = (row.time_us - 0.005) * 1e-6, t_hi = (row.time_us + 0.005) * 1e-6;
      EXPECT_LE(row.algbw, row.size / t_lo / 1e9 + 0.5e-4);
      EXPECT_GE(row.algbw, row.size / t_hi / 1e9 - 0.5e-4);
      // busbw = algbw x factor, each printed to 1e-4.
      EXPECT_NEAR(row.busbw, row.algbw * bus_factor(tab.op, n), 0.5e-4 * (1 + bus_factor(tab.op, n)) + 1e-9);
      EXPECT_EQ(row.max_err, "0");
    }
  }
}

TEST(CollbenchTest, TwoRanksInt32EveryOp) { check(2, "i32", 4); }
TEST(CollbenchTest, ThreeRanksF32EveryOp) { check(3, "f32", 4); }
TEST(CollbenchTest, ThreeRanksBf16AllreduceExact) {
  const BenchRun r = collbench("--nproc 3 --op allreduce --dtype bf16 --min-bytes 2 --max-bytes 2K --factor 8 --iters 2 "
                          "--warmup 0 --timeout 20");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string header;
  const auto tables = parse(r.out, &header);
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_EQ(tables[0].rows.size(), 4u);  // 2, 16, 128, 1024 B
  for (const Row& row : tables[0].rows) EXPECT_EQ(row.max_err, "0");
}

// ZeRO's in-place pair alone, bf16 (the reducer's 16-bit buckets), 2 ranks, odd counts (blocks of
// unequal length): exact.
TEST(CollbenchTest, TwoRanksBf16BlocksPairExact) {
  for (const char* op : {"reduce_scatter_blocks", "allgather_blocks"}) {
    SCOPED_TRACE(op);
    const BenchRun r = collbench(std::string("--nproc 2 --op ") + op +
                                 " --dtype bf16 --min-bytes 2 --max-bytes 2K --factor 3 --iters 2 --warmup 0 --timeout 20");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::string header;
    const auto tables = parse(r.out, &header);
    ASSERT_EQ(tables.size(), 1u);
    EXPECT_EQ(tables[0].op, op);
    ASSERT_EQ(tables[0].rows.size(), 7u);  // 2, 6, 18, 54, 162, 486, 1458 B: 1, 3, 9, ... 729 elements
    for (const Row& row : tables[0].rows) EXPECT_EQ(row.max_err, "0");
  }
}

TEST(CollbenchTest, UsageErrors) {
  EXPECT_NE(collbench("--op gather").code, 0);
  const BenchRun nccl = collbench("--backend nccl --op allgather_blocks");
  EXPECT_EQ(nccl.code, 2);
  EXPECT_THAT(nccl.err, HasSubstr("--op allgather_blocks runs on the ring backend only"));
  const BenchRun r = collbench("--min-bytes 1X");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown suffix"));
}

}  // namespace
