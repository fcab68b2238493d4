// defines: the one way a test that needs a GPU is written, so that no GPU test can be left out of
// a GPU run (issue 20 §2):
//
//   DP_GPU_TEST(SuiteGpu, Name)                  a test needing a GPU
//   DP_GPUS_TEST(SuiteGpu, Name, n)              one needing n GPUs (one suite per n)
//   DP_GPU_TEST_IN_CHILD(SuiteGpu, Name)         the same, with the GPUs counted in a forked
//   DP_GPUS_TEST_IN_CHILD(SuiteGpu, Name, n)     child: for tests that fork ranks, since a CUDA
//                                                context does not survive a fork
//   DP_GPU_TEST_F(FixtureGpu, Name)              TEST_F / TEST_P over a fixture derived from
//   DP_GPU_TEST_P(FixtureGpu, Name)              dp::gputest::GpuFixture<...> (GpuTestWithParam<P>
//                                                for TEST_P); its setup goes in GpuSetUp, which
//                                                runs only with the GPUs there
//
// Every suite (or fixture) name ends in "Gpu" (a static_assert): the GPU runbook's gtest filter,
// the one line of tools/gpu/gtest_filter.txt (compiled in as DPTRAIN_GPU_TEST_FILTER), selects
// exactly those. On a host with fewer GPUs than the test needs, the test skips with the reason
// ("no GPU"; "needs 2 GPUs; this host has 1") -- unless that filter would not select it: then it
// FAILS, naming the test, the filter and what to do. CI runs every test without a GPU, so a GPU
// test that a GPU run would leave out fails CI (tests/base/test_gpu_test_rule.cpp holds the
// matcher and the decision to gtest's filter syntax).
//
// A test here counts as a GPU test also in the emulator build (test_kernels_emu), which reports
// one device: its GPU tests run there.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/device_memory.h"

#ifndef DPTRAIN_GPU_TEST_FILTER
#error "DPTRAIN_GPU_TEST_FILTER (tools/gpu/gtest_filter.txt) is defined by tests/CMakeLists.txt"
#endif

namespace dp::gputest {

// The runbook's filter, as tools/gpu/gtest_filter.txt held it at configure time.
inline constexpr const char* kRunbookFilter = DPTRAIN_GPU_TEST_FILTER;

constexpr bool ends_with_gpu(std::string_view name) {
  return name.size() > 3 && name.substr(name.size() - 3) == "Gpu";
}

// gtest's wildcard match: '*' any string (also empty, also across '.' and '/'), '?' one
// character, anything else itself; the whole name must match.
inline bool glob_match(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, resume = n;  // try '*' as empty first, widen it on a mismatch
    } else if (star != std::string_view::npos) {
      p = star + 1, n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Whether any of the ':'-separated patterns matches.
inline bool any_matches(std::string_view patterns, std::string_view name) {
  while (true) {
    const size_t colon = patterns.find(':');
    if (glob_match(patterns.substr(0, colon), name)) return true;
    if (colon == std::string_view::npos) return false;
    patterns.remove_prefix(colon + 1);
  }
}

// gtest's --gtest_filter rule: POSITIVE[-NEGATIVE], each a ':'-separated list of patterns; an
// empty positive part means '*'. A test runs when its full name ("Suite.Name", or
// "Prefix/Suite.Name/Param" for a parameterised one) matches a positive pattern and no negative one.
inline bool filter_selects(std::string_view filter, std::string_view full_name) {
  const size_t dash = filter.find('-');
  const std::string_view positive = filter.substr(0, dash);
  const std::string_view negative = dash == std::string_view::npos ? std::string_view() : filter.substr(dash + 1);
  if (!(positive.empty() ? glob_match("*", full_name) : any_matches(positive, full_name))) return false;
  return negative.empty() || !any_matches(negative, full_name);
}

// What a GPU test does on a host with `have` GPUs when it needs `need`.
struct Gate {
  enum Kind { Run, Skip, Fail } kind;
  std::string message;  // the skip reason, or the failure
};

inline Gate gate(int need, int have, std::string_view full_name, std::string_view filter) {
  if (have >= need) return {Gate::Run, ""};
  if (!filter_selects(filter, full_name))
    return {Gate::Fail, std::string(full_name) + " needs a GPU, but the GPU runbook's gtest filter \"" +
                            std::string(filter) +
                            "\" (tools/gpu/gtest_filter.txt) does not select it, so no GPU run would run it: define "
                            "it with DP_GPU_TEST / DP_GPU_TEST_F / DP_GPU_TEST_P (tests/gpu_test.h) under a suite "
                            "name ending in Gpu"};
  if (need == 1) return {Gate::Skip, "no GPU"};
  return {Gate::Skip, "needs " + std::to_string(need) + " GPUs; this host has " + std::to_string(have)};
}

// "Suite.Name" of the running test (with gtest's Prefix/ and /Param parts when parameterised).
inline std::string current_test_name() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return t == nullptr ? std::string("(no test)") : std::string(t->test_suite_name()) + "." + t->name();
}

// Where the GPUs are counted: in this process, or in a forked child (the collectives' tests fork
// ranks, and a CUDA context does not survive a fork, so their test process never touches CUDA).
struct InProcess {
  static int gpus() { return cuda_device_count(); }
};
struct InChild {
  static int gpus() {
    static const int n = [] {
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid == 0) _exit(std::min(cuda_device_count(), 100));
      int st = 0;
      waitpid(pid, &st, 0);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    }();
    return n;
  }
};

// The tag every GPU fixture carries (the macros check it).
class GpuGated {};

// The base of every GPU test: SetUp (final) runs the gate, then GpuSetUp, the fixture's own.
template <int kGpus = 1, class Where = InProcess, class Base = ::testing::Test>
class GpuFixture : public Base, public GpuGated {
  static_assert(kGpus >= 1, "a GPU test needs at least one GPU");

 protected:
  void SetUp() final {
    const Gate g = gate(kGpus, Where::gpus(), current_test_name(), kRunbookFilter);
    if (g.kind == Gate::Fail) GTEST_FAIL() << g.message;
    if (g.kind == Gate::Skip) GTEST_SKIP() << g.message;
    GpuSetUp();
  }
  virtual void GpuSetUp() {}
};

// The base of a parameterised GPU test's fixture (DP_GPU_TEST_P), needing one GPU.
template <class Param>
using GpuTestWithParam = GpuFixture<1, InProcess, ::testing::TestWithParam<Param>>;

}  // namespace dp::gputest

#define DP_GPU_SUITE_NAME_CHECK_(Suite)                       \
  static_assert(::dp::gputest::ends_with_gpu(#Suite),         \
                #Suite ": a GPU test's suite name ends in Gpu " \
                "(tools/gpu/gtest_filter.txt selects *Gpu.*)")

#define DP_GPU_TEST_WITH_(Suite, Name, n, Where)                      \
  DP_GPU_SUITE_NAME_CHECK_(Suite);                                    \
  using Suite = ::dp::gputest::GpuFixture<n, ::dp::gputest::Where>; \
  TEST_F(Suite, Name)

#define DP_GPU_TEST(Suite, Name) DP_GPU_TEST_WITH_(Suite, Name, 1, InProcess)
#define DP_GPUS_TEST(Suite, Name, n) DP_GPU_TEST_WITH_(Suite, Name, n, InProcess)
#define DP_GPU_TEST_IN_CHILD(Suite, Name) DP_GPU_TEST_WITH_(Suite, Name, 1, InChild)
#define DP_GPUS_TEST_IN_CHILD(Suite, Name, n) DP_GPU_TEST_WITH_(Suite, Name, n, InChild)

#define DP_GPU_FIXTURE_CHECK_(Fixture)                                              \
  DP_GPU_SUITE_NAME_CHECK_(Fixture);                                                \
  static_assert(std::is_base_of_v<::dp::gputest::GpuGated, Fixture>, #Fixture       \
                ": a GPU fixture derives from dp::gputest::GpuFixture (tests/gpu_test.h)")

#define DP_GPU_TEST_F(Fixture, Name) \
  DP_GPU_FIXTURE_CHECK_(Fixture);    \
  TEST_F(Fixture, Name)

#define DP_GPU_TEST_P(Fixture, Name) \
  DP_GPU_FIXTURE_CHECK_(Fixture);    \
  TEST_P(Fixture, Name)
