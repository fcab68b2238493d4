// base/pages.h: the whole pages inside a byte range (pure), and an anonymous page mapping whose
// pages come in when written and go back when released (reading as zeros again), as mincore sees.
#include <gtest/gtest.h>

#include <cstring>

#include "base/pages.h"

namespace dp {
namespace {

TEST(Pages, PagesInsideRoundBeginUpAndEndDown) {
  EXPECT_EQ(pages_inside(0, 8192, 4096), std::make_pair(uintptr_t{0}, uintptr_t{8192}));
  EXPECT_EQ(pages_inside(1, 8192, 4096), std::make_pair(uintptr_t{4096}, uintptr_t{8192}));
  EXPECT_EQ(pages_inside(1, 8191, 4096), std::make_pair(uintptr_t{4096}, uintptr_t{4096}));  // none whole
  EXPECT_EQ(pages_inside(4095, 4097, 4096), std::make_pair(uintptr_t{4096}, uintptr_t{4096}));
  EXPECT_EQ(pages_inside(100, 120, 4096).first, pages_inside(100, 120, 4096).second);  // empty
  EXPECT_EQ(pages_inside(4096, 3 * 4096 + 5, 4096), std::make_pair(uintptr_t{4096}, uintptr_t{3 * 4096}));
}

TEST(Pages, MappingFillsWhenWrittenAndReleasedPagesReadAsZeros) {
  const size_t page = page_size();
  const size_t bytes = 8 * page + 100;  // the last page partly used
  auto* p = static_cast<unsigned char*>(map_pages(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
  EXPECT_EQ(resident_bytes(p, bytes), 0u) << "nothing resident before it is written";
  std::memset(p, 0xab, bytes);
  EXPECT_EQ(resident_bytes(p, bytes), 9 * page);
  // Bytes [page / 2, 5 page + 7): the pages 1..4 are inside, pages 0 and 5 only partly.
  EXPECT_EQ(release_pages(p + page / 2, 5 * page + 7 - page / 2), 4 * page);
  EXPECT_EQ(resident_bytes(p, bytes), 5 * page);
  EXPECT_EQ(resident_bytes(p + page, 4 * page), 0u);
  p[2 * page] = 1;  // a write brings one fresh (zero) page back
  EXPECT_EQ(resident_bytes(p, bytes), 6 * page);
  // (Read last: a read of a released page maps the shared zero page, which mincore counts.)
  for (size_t i = 0; i < bytes; ++i) {
    const bool released = i >= page && i < 5 * page;
    ASSERT_EQ(p[i], i == 2 * page ? 1 : released ? 0 : 0xab) << "byte " << i;  // partial pages keep theirs
  }
  EXPECT_EQ(release_pages(p + 10, page - 20), 0u) << "no whole page inside";
  unmap_pages(p, bytes);
}

}  // namespace
}  // namespace dp
