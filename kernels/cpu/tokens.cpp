#include "kernels/cpu/tokens.h"

namespace dp::kernels::cpu {

void split_token_windows(const uint16_t* windows, int64_t rows, int64_t T, int32_t* x, int32_t* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* w = windows + r * (T + 1);
    int32_t* xr = x + r * T;
    int32_t* yr = y + r * T;
    for (int64_t t = 0; t < T; ++t) xr[t] = w[t], yr[t] = w[t + 1];
  }
}

}  // namespace dp::kernels::cpu
