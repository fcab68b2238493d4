#include "kernels/cuda/emu/options.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dp::emu {
namespace {

// The value of `name` as a non-negative integer, or `fallback` when unset; a malformed value is
// fatal (a typo in a checking option must not silently turn the check off).
long env_int(const char* name, long fallback, long lo, long hi) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "dp cuda emu: %s=%s is not an integer in [%ld, %ld]\n", name, s, lo, hi);
    std::exit(2);
  }
  std::fprintf(stderr, "dp cuda emu: %s=%ld\n", name, v);
  return v;
}

Options read_options() {
  Options o;
  o.racecheck = env_int("DP_EMU_RACECHECK", 0, 0, 1) != 0;
  o.stack_bytes = static_cast<size_t>(env_int("DP_EMU_STACK_KB", 256, 16, 1 << 20)) * 1024;
  return o;
}

std::atomic<int>& racecheck_override() {
  static std::atomic<int> v{-1};  // -1: follow the environment
  return v;
}

}  // namespace

const Options& options() {
  static const Options o = read_options();
  return o;
}

bool racecheck_enabled() {
  const int v = racecheck_override().load(std::memory_order_relaxed);
  return v < 0 ? options().racecheck : v != 0;
}

void set_racecheck(bool on) { racecheck_override().store(on ? 1 : 0); }

}  // namespace dp::emu
