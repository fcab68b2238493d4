// defines: the distributed sampler, as pure functions: which dataset indices rank r of N visits
// in an epoch, in order. Semantics are exactly torch.utils.data.DistributedSampler's:
//
//   1. order   = a permutation of [0, n) chosen by (seed, epoch), or [0, n) if !shuffle
//   2. drop_last = false: total = ceil(n / N) * N; pad by repeating `order` from its start
//                         (cyclically, so padding longer than n repeats it several times)
//      drop_last = true:  total = floor(n / N) * N; truncate `order` to its first `total`
//   3. rank r takes order[r], order[r + N], order[r + 2N], ...  (order[r:total:N])
//
// Every rank gets total / N indices, so every rank runs the same number of steps.
// The permutation is ours (Permutation::Philox, the default) or torch's own
// (Permutation::Torch: torch.randperm(n) with a CPU generator seeded seed + epoch, as
// DistributedSampler draws it), so that a PyTorch run and a dptrain run see the same data order.
// sampler_indices_from_permutation takes any permutation (tests/oracle/test_sampler_torch.py).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/data_choices.h"  // Permutation

namespace dp::data {

std::vector<int64_t> sampler_permutation(int64_t n, uint64_t seed, uint64_t epoch,
                                         Permutation kind = Permutation::Philox);

// Steps 2 and 3 above, for a given order (`perm` need not be a permutation: it is used as is).
std::vector<int64_t> sampler_indices_from_permutation(const std::vector<int64_t>& perm, int world_size, int rank,
                                                      bool drop_last);

// Steps 1 to 3.
std::vector<int64_t> sampler_indices(int64_t dataset_size, int world_size, int rank, bool shuffle, uint64_t seed,
                                     uint64_t epoch, bool drop_last, Permutation kind = Permutation::Philox);

// A rank's indices for the rest of an epoch whose first `skip` samples (of the global order,
// counted over all ranks of the run that consumed them) are done: mid-epoch resume, also at
// another world size. When skip is a multiple of world_size (always at an unchanged world size)
// this is sampler_indices minus the rank's skip / world_size first entries, so a resumed run
// sees exactly what the interrupted one would have; otherwise the rest of the global order is
// shared out anew (sampler_indices_from_permutation).
std::vector<int64_t> sampler_indices_after(int64_t dataset_size, int world_size, int rank, bool shuffle,
                                           uint64_t seed, uint64_t epoch, bool drop_last, int64_t skip,
                                           Permutation kind = Permutation::Philox);

// How many indices every rank gets: ceil(n / N) or, with drop_last, floor(n / N).
int64_t sampler_num_samples(int64_t dataset_size, int world_size, bool drop_last);

}  // namespace dp::data
