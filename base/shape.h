// defines: Shape (a tensor's dimensions, outermost first), its element count, its "[2, 3, 4]" form
// the batched shape [n, s...] of a per-sample shape, and the bytes of a tensor of a shape and dtype.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace dp {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
Shape with_batch(int64_t n, const Shape& s);  // [n, s...]
// Bytes of a tensor of `shape` in `dtype`.
inline size_t bytes_of(const Shape& shape, DType dtype) { return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype); }

}  // namespace dp
