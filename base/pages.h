// defines: host memory at the granularity of pages, what ZeRO stage 2's gradient arena is built on
// (train.zero = 2, collectives/reducer/zero_shard.h): an anonymous mapping of its own
// (map_pages: page-aligned, reading as zeros, nothing resident until written, never transparent
// huge pages, so that single pages can be given back), giving back the whole pages inside a byte
// range (release_pages: madvise(MADV_DONTNEED); their memory returns to the system at once and
// they read as zeros afterwards, a write faults a fresh zero page in) and the resident bytes of a
// range (resident_bytes: mincore(2)).
//
// mincore counts a page as resident once it is mapped, and a page only *read* since it was given
// back maps the system's shared zero page (no memory of its own): the count is exact for memory
// that is written before it is read, as a gradient arena is (layers accumulate into it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dp {

size_t page_size();  // sysconf(_SC_PAGESIZE)

// The whole pages inside the byte addresses [begin, end): begin rounded up and end rounded down
// to multiples of `page` (a power of two); begin == end when none lies inside. Pure.
std::pair<uintptr_t, uintptr_t> pages_inside(uintptr_t begin, uintptr_t end, size_t page);

// An anonymous private mapping of `bytes` (rounded up to whole pages, at least one), zero-filled,
// MADV_NOHUGEPAGE. Null when the system refuses it. Unmap with unmap_pages(p, bytes).
void* map_pages(size_t bytes);
void unmap_pages(void* p, size_t bytes);

// Gives back the whole pages inside [p, p + bytes) of a map_pages mapping (the partial pages at
// either end stay, with their contents); returns the bytes given back.
size_t release_pages(void* p, size_t bytes);

// The bytes of the pages overlapping [p, p + bytes) that are resident now (whole pages).
size_t resident_bytes(const void* p, size_t bytes);

}  // namespace dp
