// defines: Shape (a tensor's dimensions, outermost first), its element count and its "[2, 3, 4]" form.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"

}  // namespace dp
