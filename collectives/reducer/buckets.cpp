#include "collectives/reducer/buckets.h"

#include <cstddef>
#include <utility>

namespace dp {

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& slot_numel, int64_t first_cap, int64_t cap) {
  std::vector<int64_t> offset(slot_numel.size() + 1, 0);
  for (size_t i = 0; i < slot_numel.size(); ++i) offset[i + 1] = offset[i] + slot_numel[i];
  std::vector<Bucket> out;
  Bucket cur;
  int64_t size = 0;
  for (int s = static_cast<int>(slot_numel.size()) - 1; s >= 0; --s) {
    if (cur.slots.empty()) cur.end = offset[s + 1];
    cur.slots.push_back(s);
    cur.begin = offset[s];
    size += slot_numel[s];
    if (size >= (out.empty() ? first_cap : cap)) {
      out.push_back(std::move(cur));
      cur = Bucket{};
      size = 0;
    }
  }
  if (!cur.slots.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace dp
