#include "base/device.h"

#include <fmt/format.h>

namespace dp {

std::string Device::str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }

}  // namespace dp
