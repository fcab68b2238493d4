#include "runtime/data/dataset.h"

namespace dp::data {

int32_t Dataset::get_u8(int64_t, const SampleKey&, uint8_t*) const {
  throw DpError(fmt::format("{} does not hold bytes: read its samples with get() [{}]", describe(), identity_string()));
}

void Dataset::get_tokens(int64_t, uint16_t*) const {
  throw DpError(fmt::format("{} does not hold token windows: read its samples with get() [{}]", describe(),
                            identity_string()));
}

}  // namespace dp::data
