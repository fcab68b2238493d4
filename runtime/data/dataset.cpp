#include "runtime/data/dataset.h"

#include <algorithm>

namespace dp::data {

int32_t Dataset::get_u8(int64_t, const SampleKey&, uint8_t*) const {
  throw DpError(fmt::format("{} does not hold bytes: read its samples with get() [{}]", describe(), identity_string()));
}

void Dataset::get_tokens(int64_t, uint16_t*) const {
  throw DpError(fmt::format("{} does not hold token windows: read its samples with get() [{}]", describe(),
                            identity_string()));
}

void check_sample_values(const std::string& path, const Shape& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return;  // no values at all
  unsigned __int128 values = 1;  // each factor is below 2^63: stopping past 2^32 keeps it below 2^96
  for (int64_t d : shape)
    if ((values *= static_cast<uint64_t>(d)) > static_cast<uint64_t>(kMaxSampleValues))
      DP_THROW_USER("{}: one sample of shape {} holds more than 2^32 values (the most dptrain reads): the header is "
                    "damaged",
                    path, shape_str(shape));
}

}  // namespace dp::data
