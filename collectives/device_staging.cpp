#include "collectives/device_staging.h"

#include <vector>

namespace dp {

int choose_staging_buffer(const std::vector<StagingBufferInfo>& buffers, size_t bytes, int device) {
  int best = -1;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = buffers[i];
    if (b.busy || b.device != device || b.bytes < bytes) continue;
    if (best < 0 || b.bytes < buffers[static_cast<size_t>(best)].bytes) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace dp
