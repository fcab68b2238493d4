// defines: split_token_windows, token windows -> the model's inputs and targets: the CPU twin of
// kernels/cuda/tokens.h (the GPU input pipeline widens the uploaded windows there).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// windows (rows, T + 1) uint16 -> x (rows, T) int32 = windows[:, :T] and y (rows, T) int32 =
// windows[:, 1:]: the inputs and, at each position, the next token (the target).
void split_token_windows(const uint16_t* windows, int64_t rows, int64_t T, int32_t* x, int32_t* y);

}  // namespace dp::kernels::cpu
