#include "base/shape.h"

namespace dp {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Shape with_batch(int64_t n, const Shape& s) {
  Shape out{n};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace dp
