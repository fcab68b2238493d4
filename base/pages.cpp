#include "base/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/error.h"

namespace dp {

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::pair<uintptr_t, uintptr_t> pages_inside(uintptr_t begin, uintptr_t end, size_t page) {
  const uintptr_t mask = static_cast<uintptr_t>(page) - 1;
  const uintptr_t lo = (begin + mask) & ~mask, hi = end & ~mask;
  return lo < hi ? std::make_pair(lo, hi) : std::make_pair(lo, lo);
}

namespace {
size_t mapped_bytes(size_t bytes) {
  const size_t page = page_size();
  return bytes == 0 ? page : (bytes + page - 1) / page * page;
}
}  // namespace

void* map_pages(size_t bytes) {
  void* p = ::mmap(nullptr, mapped_bytes(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // Transparent huge pages would make a given-back 4 KiB page part of a 2 MiB one: the kernel
  // splits it lazily and khugepaged may collapse the range again (filling the released pages).
  // Advisory: a kernel without THP refuses it, which is what it asks for anyway.
#ifdef MADV_NOHUGEPAGE
  (void)::madvise(p, mapped_bytes(bytes), MADV_NOHUGEPAGE);
#endif
  return p;
}

void unmap_pages(void* p, size_t bytes) {
  if (p != nullptr) ::munmap(p, mapped_bytes(bytes));
}

size_t release_pages(void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto [lo, hi] = pages_inside(begin, begin + bytes, page_size());
  if (lo == hi) return 0;
  CHECK_SYS(::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED));
  return hi - lo;
}

size_t resident_bytes(const void* p, size_t bytes) {
  if (bytes == 0) return 0;
  const size_t page = page_size();
  const auto begin = reinterpret_cast<uintptr_t>(p) & ~(static_cast<uintptr_t>(page) - 1);
  const auto end = reinterpret_cast<uintptr_t>(p) + bytes;
  const size_t pages = (end - begin + page - 1) / page;
  thread_local std::vector<unsigned char> vec;  // one byte per page; kept between calls
  vec.resize(pages);
  CHECK_SYS(::mincore(reinterpret_cast<void*>(begin), pages * page, vec.data()));
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident * page;
}

}  // namespace dp
