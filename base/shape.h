// defines: Shape (a tensor's dimensions, outermost first), its element count, its "[2, 3, 4]" form
// and the batched shape [n, s...] of a per-sample shape.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
Shape with_batch(int64_t n, const Shape& s);  // [n, s...]

}  // namespace dp
