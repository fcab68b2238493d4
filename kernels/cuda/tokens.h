// defines: split_token_windows, the GPU input pipeline's step for token windows: the uploaded
// uint16 windows (rows, T + 1) widened to the model's i32 inputs x (rows, T) = windows[:, :T] and
// targets y (rows, T) = windows[:, 1:]. CUDA twin of kernels/cpu/tokens.h, equal bit for bit.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// rows >= 0, T >= 1 (else cudaErrorInvalidValue); rows == 0 launches nothing.
[[nodiscard]] cudaError_t split_token_windows(const uint16_t* windows, int64_t rows, int64_t T, int32_t* x,
                                              int32_t* y, cudaStream_t stream);

}  // namespace dp::kernels::cuda
