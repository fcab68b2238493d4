// defines: the log's planned-beside-measured memory table (issue 30, section 2: after step 1 the
// memory account's measured bytes per category beside the planned ones): the account's categories
// (runtime/memory_account.h) gathered into the plan's, `dptrain memory`'s names
// (launch/memory_estimate.h), one line per category. Pure.
#pragma once
#include <array>
#include <cstddef>
#include <string>

#include "launch/memory_estimate.h"
#include "runtime/memory_account.h"

namespace dp::launch {

// A category the account does not see (workspace, buckets, a GPU's input slots).
inline constexpr size_t kNotMeasured = SIZE_MAX;

// The account in the plan's categories: parameters = the parameter arena and buffers, less the
// fp32 master copy (`master_bytes`, 0 in f32) plus the 16-bit compute copy; master_weights = that
// master copy; gradients = the fp32 and 16-bit gradient arenas; optimizer_state; activations = the
// graph's outputs and input gradients (on the CPU: its step arena) and the layers' own tensors;
// input = the loader's host batches on the CPU (`cuda` false); other = the rest; workspace and
// buckets are kNotMeasured, and so is input on a GPU (`cuda`), whose plan counts the device's input
// slots, not the host batches the account's `input` holds there.
std::array<size_t, kPlannedCategories> measured_by_planned_category(const MemoryBreakdown& b, size_t master_bytes,
                                                                    bool cuda);

// "  <category>       planned <bytes> (<MiB> MiB)  measured <bytes> (<MiB> MiB)" per category
// ("measured -" for kNotMeasured), then the two totals.
std::string memory_vs_plan_table(const MemoryEstimate& planned, const std::array<size_t, kPlannedCategories>& measured);

}  // namespace dp::launch
