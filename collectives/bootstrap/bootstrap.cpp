#include "collectives/bootstrap/bootstrap.h"

#include "base/error.h"

namespace dp {

// ---- defaults: both through allgather (bootstrap traffic is tiny; simplicity wins) ----

std::string Bootstrap::broadcast(const std::string& blob, int root) {
  DP_CHECK(root >= 0 && root < size(), "bootstrap {}: broadcast root {} outside the world of {}", kind(), root, size());
  auto all = allgather(rank() == root ? blob : std::string());
  return std::move(all[static_cast<size_t>(root)]);
}

void Bootstrap::barrier() { allgather(std::string()); }

const std::string& Bootstrap::job_token() const {
  static const std::string none;
  return none;
}

}  // namespace dp
