#include "runtime/data/sampler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "runtime/data/keyed_rng.h"

namespace dp::data {

std::vector<int64_t> sampler_permutation(int64_t n, uint64_t seed, uint64_t epoch, Permutation kind) {
  DP_CHECK(n >= 0, "dataset size {} < 0", n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  if (kind == Permutation::Torch) {
    // torch.Generator.manual_seed(seed + epoch) seeds MT19937 with the low 32 bits.
    if (n >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max() / 20))
      DP_THROW_USER("data.permutation = \"torch\" supports data sets below {} samples (torch draws larger "
                    "permutations another way); this one has {}: use data.permutation = \"philox\"",
                    std::numeric_limits<uint32_t>::max() / 20, n);
    std::mt19937 mt(static_cast<uint32_t>(seed + epoch));
    for (int64_t i = 0; i + 1 < n; ++i) {
      const int64_t z = static_cast<int64_t>(mt() % static_cast<uint64_t>(n - i));
      std::swap(p[i], p[i + z]);
    }
    return p;
  }
  Rng rng = keyed_rng(seed, kStreamShuffle, epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));  // uniform in [0, i]
    std::swap(p[i], p[j]);
  }
  return p;
}

std::vector<int64_t> sampler_indices_after(int64_t n, int world, int rank, bool shuffle, uint64_t seed,
                                           uint64_t epoch, bool drop_last, int64_t skip, Permutation kind) {
  skip = std::max<int64_t>(0, std::min(skip, n));
  if (skip % world == 0) {
    std::vector<int64_t> order = sampler_indices(n, world, rank, shuffle, seed, epoch, drop_last, kind);
    order.erase(order.begin(), order.begin() + std::min<int64_t>(skip / world, static_cast<int64_t>(order.size())));
    return order;
  }
  std::vector<int64_t> perm(static_cast<size_t>(n));
  if (shuffle) perm = sampler_permutation(n, seed, epoch, kind);
  else std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin(), perm.begin() + skip);
  return sampler_indices_from_permutation(perm, world, rank, drop_last);
}

int64_t sampler_num_samples(int64_t dataset_size, int world_size, bool drop_last) {
  DP_CHECK(dataset_size >= 0, "dataset size {} < 0", dataset_size);
  DP_CHECK(world_size >= 1, "world size {} < 1", world_size);
  return drop_last ? dataset_size / world_size : (dataset_size + world_size - 1) / world_size;
}

std::vector<int64_t> sampler_indices_from_permutation(const std::vector<int64_t>& perm, int world_size, int rank,
                                                      bool drop_last) {
  DP_CHECK(rank >= 0 && rank < world_size, "rank {} out of range for world size {}", rank, world_size);
  const int64_t n = static_cast<int64_t>(perm.size());
  const int64_t per_rank = sampler_num_samples(n, world_size, drop_last);
  std::vector<int64_t> out(static_cast<size_t>(per_rank));
  // Position k of the padded (or truncated) list is perm[k mod n]: torch's padding repeats the
  // list from its start, as many times as needed.
  for (int64_t i = 0; i < per_rank; ++i) out[i] = perm[(rank + i * world_size) % n];
  return out;
}

std::vector<int64_t> sampler_indices(int64_t dataset_size, int world_size, int rank, bool shuffle, uint64_t seed,
                                     uint64_t epoch, bool drop_last, Permutation kind) {
  std::vector<int64_t> order;
  if (shuffle) {
    order = sampler_permutation(dataset_size, seed, epoch, kind);
  } else {
    DP_CHECK(dataset_size >= 0, "dataset size {} < 0", dataset_size);
    order.resize(static_cast<size_t>(dataset_size));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  return sampler_indices_from_permutation(order, world_size, rank, drop_last);
}

}  // namespace dp::data
