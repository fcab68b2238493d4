// A rank waiting for the others at start-up says so at info level every
// DPTRAIN_RENDEZVOUS_REPORT_S seconds (here 0.4 s) instead of staying silent until dist.timeout_s:
// the TCP-store bootstrap (waiting for late ranks, and for rank 0's store), the file bootstrap,
// and the one line of a library fence that cannot count (call_with_deadline's on_slow).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "collectives/bootstrap/dynlib.h"
#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/file.h"
#include "runtime/log.h"
#include "tests/collectives/multiproc.h"

namespace dp {
namespace {

using testing_mp::map_env;
using testing_mp::run_world;
using ::testing::HasSubstr;

// The "coll" logger's info lines, as their bare messages, in this process.
class CollLog {
 public:
  CollLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(os_)) {
    sink_->set_pattern("%v");
    auto lg = log::get("coll");
    lg->sinks().push_back(sink_);
    lg->set_level(spdlog::level::info);
  }
  // The lines holding `part`, joined by '\n'.
  std::string lines_with(const std::string& part) {
    std::istringstream in(os_.str());
    std::string out;
    for (std::string l; std::getline(in, l);)
      if (l.find(part) != std::string::npos) out += l + "\n";
    return out;
  }

 private:
  std::ostringstream os_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

std::map<std::string, std::string> env_of(int rank, int size, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"DPTRAIN_RENDEZVOUS_REPORT_S", "0.4"}};
}

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(RendezvousProgress, PureLineAndInterval) {
  EXPECT_EQ(waiting_line("bootstrap env", 1, {2, 3}, 4, 0, 5.2, 300),
            "bootstrap env: rank 1 waiting for ranks 2, 3 (2 of 4 arrived) in allgather #0 (startup): 5.2 s of 300 s");
  EXPECT_EQ(rendezvous_report_s(map_env({})), 5.0);
  EXPECT_EQ(rendezvous_report_s(map_env({{"DPTRAIN_RENDEZVOUS_REPORT_S", "0.25"}})), 0.25);
  try {
    rendezvous_report_s(map_env({{"DPTRAIN_RENDEZVOUS_REPORT_S", "0"}}));
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "environment variable DPTRAIN_RENDEZVOUS_REPORT_S = \"0\" is not allowed: expected a "
                           "number in [0.1, 3600]; unset it for the default (5)");
  }
}

// Rank 2 of 3 arrives 1.5 s late: ranks 0 and 1 say every 0.4 s that they wait for it.
TEST(RendezvousProgress, StoreRanksSayWhoTheyWaitFor) {
  const int port = testing_mp::free_port();
  auto res = run_world(3, [&](int rank, std::string& report) {
    CollLog log;
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto b = make_env_bootstrap(20, map_env(env_of(rank, 3, port)));
    report = log.lines_with("waiting");
    return b->allgather("x").size() == 3 ? 0 : 1;
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(res[r].status, 0) << res[r].message;
    EXPECT_THAT(res[r].message, HasSubstr(fmt::format("bootstrap env: rank {} waiting for rank 2 (2 of 3 arrived) in "
                                                      "allgather #0 (startup): ",
                                                      r)));
    EXPECT_THAT(res[r].message, HasSubstr(" s of 20 s\n"));
    EXPECT_GE(count_lines(res[r].message), 2u) << res[r].message;
  }
  EXPECT_EQ(res[2].status, 0);
  EXPECT_EQ(res[2].message, "") << "the last rank waits for nobody";
}

// Rank 0 (which serves the store) starts 1.2 s late: rank 1 says it waits for the store.
TEST(RendezvousProgress, StoreClientSaysItWaitsForRankZero) {
  const int port = testing_mp::free_port();
  auto res = run_world(2, [&](int rank, std::string& report) {
    CollLog log;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    auto b = make_env_bootstrap(20, map_env(env_of(rank, 2, port)));
    report = log.lines_with("waiting");
    return 0;
  });
  EXPECT_EQ(res[1].status, 0) << res[1].message;
  EXPECT_THAT(res[1].message, HasSubstr(fmt::format("bootstrap env: rank 1 waiting for the TCP store at 127.0.0.1:{} "
                                                    "(served by rank 0, which has not started listening): ",
                                                    port)));
}

TEST(RendezvousProgress, FileRanksSayWhoTheyWaitFor) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           fmt::format("dptrain_rdv_progress_{}", ::getpid())).string();
  std::filesystem::remove_all(dir);
  auto res = run_world(3, [&](int rank, std::string& report) {
    CollLog log;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto b = make_file_bootstrap(dir, 20,
                                 map_env({{"RANK", std::to_string(rank)},
                                          {"WORLD_SIZE", "3"},
                                          {"DPTRAIN_RENDEZVOUS_REPORT_S", "0.4"}}));
    report = log.lines_with("waiting");
    return 0;
  });
  std::filesystem::remove_all(dir);
  for (int r : {1, 2}) {
    EXPECT_EQ(res[r].status, 0) << res[r].message;
    EXPECT_THAT(res[r].message, HasSubstr(fmt::format("bootstrap file: rank {} waiting for rank 0 (2 of 3 arrived) in "
                                                      "allgather #0 (startup): ",
                                                      r)));
    EXPECT_GE(count_lines(res[r].message), 2u) << res[r].message;
  }
}

// PMIx and PMI2 fences cannot count: the caller's on_slow runs once when the call is slow, never
// when it is quick.
TEST(RendezvousProgress, SlowLibraryCallIsReportedOnce) {
  int slow = 0;
  auto r = call_with_deadline<int>(
      [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        return 7;
      },
      10, [&] { ++slow; }, 0.1);
  EXPECT_EQ(r, 7);
  EXPECT_EQ(slow, 1);
  auto quick = call_with_deadline<int>([] { return 3; }, 10, [&] { ++slow; }, 5);
  EXPECT_EQ(quick, 3);
  EXPECT_EQ(slow, 1);
}

}  // namespace
}  // namespace dp
