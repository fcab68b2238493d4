// defines: MemoryCategory, what a tensor's bytes are for, and the live-bytes account per category
// that Storage::allocate / ~Storage keep (runtime/tensor.cpp): the memory breakdown of
// profile.memory. A storage is charged to the category of the innermost MemoryScope open on the
// allocating thread (Other when none), and credited back when it is freed; the same on the CPU
// (host tensors) and the GPU (the pool's allocations), so the CPU tests check the GPU's numbers.
//
//   { MemoryScope s(MemoryCategory::Activations); out = Tensor::zeros(...); }
//   MemoryBreakdown b = memory_breakdown();   // live and peak bytes per category
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace dp {

enum class MemoryCategory : int {
  Other = 0,
  Parameters,       // the fp32 parameter arena (master weights) and buffers
  ComputeParams,    // mixed precision: the 16-bit compute copy of the parameters
  Gradients,        // the fp32 gradient arena
  ComputeGrads,     // mixed precision: the 16-bit gradients
  OptimizerState,   // momentum / Adam moments
  Activations,      // layers' outputs (the graph's forward tensors)
  InputGradients,   // gradients w.r.t. layer outputs (backward), and their kept spares
  LayerState,       // allocated inside a layer's forward/backward: saved-for-backward tensors, scratch
  Input,            // the input pipeline's host batches (data::Loader's workers make them): those it
                    // prefetches and the one the step is on
  Count
};
constexpr int kMemoryCategories = static_cast<int>(MemoryCategory::Count);
const char* memory_category_name(MemoryCategory c);  // "parameters", "activations", ..., "input"

// Live bytes per category right now, and the live total and its high-water mark since the last
// reset_memory_peak() (all devices together: a process trains on one device).
struct MemoryBreakdown {
  std::array<size_t, kMemoryCategories> live{};
  size_t total = 0;  // sum of live
  size_t peak = 0;   // the largest total seen
};
MemoryBreakdown memory_breakdown();
void reset_memory_peak();

// Page mappings (Storage::map_pages: ZeRO stage 2's gradient arena) are not charged at
// allocation: their pages come and go (written by backward, given back after each bucket's
// reduce-scatter; base/pages.h), so the account measures them (mincore). memory_breakdown()
// counts each one's resident bytes now under its category, and its peak adds each one's most
// resident bytes measured so far (by memory_sample_mapped and by memory_breakdown itself) to the
// peak of the charged storages: an upper bound, the two highs need not coincide.
void memory_add_mapped(MemoryCategory c, const void* base, size_t bytes);
void memory_remove_mapped(const void* base);
struct MappedUse {
  size_t bytes = 0;     // the mapping's size
  size_t resident = 0;  // resident now
  size_t peak = 0;      // the most resident measured since it was made (or reset_memory_peak())
};
// Measures the mapping registered at `base` now, raising its peak; all zeros when there is none.
MappedUse memory_sample_mapped(const void* base);

// Charges the storages allocated on this thread while it lives to `c` (nests: the innermost wins).
class MemoryScope {
 public:
  explicit MemoryScope(MemoryCategory c);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryCategory prev_;
};

// Charges the storages allocated on this thread while it lives to graph node `node` as well (the
// graph sets it around each node's forward and backward; -1: no node), for the top layers by bytes.
class MemoryOwner {
 public:
  explicit MemoryOwner(int node);
  ~MemoryOwner();
  MemoryOwner(const MemoryOwner&) = delete;
  MemoryOwner& operator=(const MemoryOwner&) = delete;

 private:
  int prev_;
};
// Live bytes per graph node (allocated while it ran: its output, the input gradients of its
// backward, its layer's own tensors), largest first, at most `top` entries.
std::vector<std::pair<int, size_t>> memory_by_node(size_t top);

// Storage's side (runtime/tensor.cpp): the current thread's category and node; charge and credit.
MemoryCategory current_memory_category();
int current_memory_owner();
void memory_charge(MemoryCategory c, int node, size_t bytes);
void memory_credit(MemoryCategory c, int node, size_t bytes);

// The breakdown as a log table: one row per category with bytes, MiB and share of the total,
// the sum, and (device_live / device_peak > 0, a GPU) the pool's live and peak bytes beside it,
// whose difference from the sum is what the account does not see (workspace, library scratch).
std::string memory_table(const MemoryBreakdown& b, size_t device_live, size_t device_peak);
// {"split":"memory","step":S,"parameters":bytes,...,"total":..,"peak":..[,"device_live":..,"device_peak":..]}
std::string memory_json(const MemoryBreakdown& b, long long step, size_t device_live, size_t device_peak);

}  // namespace dp
