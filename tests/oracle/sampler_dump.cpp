// sampler_dump: prints what dp::data's distributed sampler gives every rank, as JSON, for
// tests/oracle/test_sampler_torch.py to compare with torch.utils.data.DistributedSampler.
//
//   sampler_dump --n N --world W [--rank R] [--drop-last] [--shuffle --seed S --epoch E [--torch]]
//   sampler_dump --world W [--rank R] [--drop-last] --perm-stdin   < [p0, p1, ...]
//
// Output: [[rank 0's indices], [rank 1's], ...] — or only [rank R's indices] with --rank.
// --perm-stdin reads the epoch's order (a JSON array) from stdin and uses
// sampler_indices_from_permutation; otherwise sampler_indices (identity order or our shuffle;
// --torch: the torch.randperm-compatible permutation).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/data/sampler.h"

namespace {
[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sampler_dump: %s\nusage: sampler_dump --n N --world W [--rank R] [--drop-last] "
               "[--shuffle --seed S --epoch E [--torch]] [--perm-stdin]\n",
               why.c_str());
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  int64_t n = -1;
  int world = 0, rank = -1;
  bool drop_last = false, shuffle = false, perm_stdin = false, torch_order = false;
  uint64_t seed = 0, epoch = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--n") n = std::stoll(value());
    else if (a == "--world") world = std::stoi(value());
    else if (a == "--rank") rank = std::stoi(value());
    else if (a == "--seed") seed = std::stoull(value());
    else if (a == "--epoch") epoch = std::stoull(value());
    else if (a == "--drop-last") drop_last = true;
    else if (a == "--shuffle") shuffle = true;
    else if (a == "--perm-stdin") perm_stdin = true;
    else if (a == "--torch") torch_order = true;
    else usage("unknown argument " + a);
  }
  if (world < 1) usage("--world must be >= 1");
  if (!perm_stdin && n < 0) usage("--n is required without --perm-stdin");
  if (rank >= world) usage("--rank must be < --world");

  try {
    std::vector<int64_t> perm;
    if (perm_stdin) {
      perm = nlohmann::json::parse(std::cin).get<std::vector<int64_t>>();
      if (n >= 0 && n != static_cast<int64_t>(perm.size()))
        usage("--n " + std::to_string(n) + " but stdin holds " + std::to_string(perm.size()) + " indices");
    }
    auto one = [&](int r) {
      return perm_stdin ? dp::data::sampler_indices_from_permutation(perm, world, r, drop_last)
                        : dp::data::sampler_indices(n, world, r, shuffle, seed, epoch, drop_last,
                                                    torch_order ? dp::data::Permutation::Torch
                                                                : dp::data::Permutation::Philox);
    };
    nlohmann::json out;
    if (rank >= 0) {
      out = one(rank);
    } else {
      out = nlohmann::json::array();
      for (int r = 0; r < world; ++r) out.push_back(one(r));
    }
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sampler_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
