// defines: ConvBiasView and conv_bias_view, how the project's bias kernels
// (kernels/cuda/elementwise.h bias_add and bias_grad, over (outer, channels, inner)) see a
// convolution's output (N, K, OH, OW): NCHW memory is (N, K, OH*OW), NHWC (channels last) memory
// is (N*OH*OW, K, 1). Pure; the GPU conv and its emulator test use the same mapping.
#pragma once
#include <cstdint>

namespace dp::models {

struct ConvBiasView {
  int64_t outer, channels, inner;
};

// n samples, k output channels, `pixels` = OH * OW per channel.
inline ConvBiasView conv_bias_view(int64_t n, int64_t k, int64_t pixels, bool channels_last) {
  return channels_last ? ConvBiasView{n * pixels, k, 1} : ConvBiasView{n, k, pixels};
}

}  // namespace dp::models
