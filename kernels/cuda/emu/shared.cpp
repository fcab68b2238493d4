#include "kernels/cuda/emu/shared.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace dp::emu {
namespace {

constexpr unsigned char kPoison = 0xFF;  // undefined shared memory: NaN in every float type

struct Freer {
  void operator()(unsigned char* p) const { std::free(p); }
};

// The arrays of the launch running on this host thread (a new launch drops the previous one's).
struct SharedTable {
  uint64_t launch = 0;
  std::vector<std::unique_ptr<SharedArrayInfo>> arrays;
  std::vector<std::unique_ptr<unsigned char, Freer>> storage;
};

SharedTable& table() {
  thread_local SharedTable t DP_EMU_TLS;
  return t;
}

std::string element_string(const SharedArrayInfo& a, size_t element) {
  std::string s = a.name;
  size_t stride = a.bytes / a.elem_size;
  for (int d = 0; d < a.rank; ++d) {
    stride /= a.extents[d];
    s += fmt::format("[{}]", element / stride);
    element %= stride;
  }
  return s;
}

}  // namespace

SharedArrayInfo& shared_storage(const void* tag, const char* name, size_t bytes, size_t elem_size, size_t align,
                                const size_t* extents, int rank) {
  BlockRunner& b = running_block("DP_SHARED");
  SharedTable& t = table();
  if (t.launch != b.launch_serial()) {
    t.arrays.clear();
    t.storage.clear();
    t.launch = b.launch_serial();
  }
  SharedArrayInfo* a = nullptr;
  for (auto& e : t.arrays)
    if (e->tag == tag) a = e.get();
  if (a == nullptr) {
    void* p = nullptr;
    if (posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, bytes) != 0) b.fail("out of host memory");
    t.storage.emplace_back(static_cast<unsigned char*>(p));
    auto info = std::make_unique<SharedArrayInfo>(
        SharedArrayInfo{tag, name, static_cast<unsigned char*>(p), bytes, elem_size, {}, rank, {}, 0});
    for (int d = 0; d < rank; ++d) info->extents[d] = extents[d];
    if (b.racecheck()) info->shadow.resize(bytes / elem_size);
    a = t.arrays.emplace_back(std::move(info)).get();
  }
  if (a->block_serial != b.block_serial()) {
    std::memset(a->data, kPoison, a->bytes);
    a->block_serial = b.block_serial();
  }
  return *a;
}

void shared_index_fault(const SharedArrayInfo& a, int dim, long long index) {
  running_block("DP_SHARED").fail(fmt::format("shared array '{}' index {} is out of range [0, {}) in dimension {} of {}",
                                              a.name, index, a.extents[dim], dim + 1, a.rank));
}

void shared_access(SharedArrayInfo& a, size_t element, bool write) {
  BlockRunner& b = *t_block;
  const EmuThread& me = b.self();
  const Accessor who{b.block_serial(), me.linear, b.barrier_generation(), me.warp_epoch};
  const Hazard h = write ? race_on_write(a.shadow[element], who) : race_on_read(a.shadow[element], who);
  if (h.kind == nullptr) return;
  const void* address = a.data + element * a.elem_size;
  if (std::strcmp(h.kind, "uninitialized read") == 0)
    b.fail(fmt::format("reads shared {} (address {}) before any thread of the block wrote it: shared memory "
                       "starts undefined in every block",
                       element_string(a, element), address));
  b.fail(fmt::format("shared-memory race ({} hazard) on {} (address {}): this thread {} it and thread {} {} it "
                     "with no barrier between (a missing __syncthreads or __syncwarp)",
                     h.kind, element_string(a, element), address, write ? "writes" : "reads",
                     coords_string(b.thread(h.other)->idx), h.other_wrote ? "wrote" : "read"));
}

}  // namespace dp::emu
