// defines: augment_batch, the device twin of data::apply_transform over a whole batch
// (RandomCrop(padding) -> RandomHorizontalFlip -> Normalize, runtime/data/transform.h), fused with
// the u8 -> f32 scaling of U8Dataset::get and the cast to the compute dtype and layout; and its
// element functions (__host__ __device__, so a host test holds them to apply_transform bit for
// bit without a GPU).
//
// The random choices are made on the host (data::pack_augment_choices: (B, 3) int32 rows of
// {dy, dx, flip}) and uploaded with the batch: the kernel has no RNG of its own, so the device
// and the CPU loader crop and flip every sample the same way.
//
// Arithmetic, per output element, as the CPU does it: v = in-bounds ? unit(in) : 0 with
// unit(u8 b) = float(b) / 255 (U8Dataset::get) and unit(f32 v) = v; then, with normalisation,
// v = (v - mean[c]) / std[c] (fp:: sub and div: one rounding each, as the CPU) — so padded
// pixels become (0 - mean[c]) / std[c]. The f32 result is cast to bf16 / f16 round to nearest
// even (kernels/cuda/cast.h's conversion). Equal to apply_transform + the CPU cast bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/host_device.h"

namespace dp::kernels::cuda {

enum class AugmentIn : int { U8, F32 };           // raw sample values: bytes or floats, NCHW
enum class AugmentOut : int { F32, BF16, F16 };  // compute dtype of the result (16-bit: raw bits)

struct AugmentDims {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // B, C, H, W
};

// out: (B, C, H, W) in `out_type`, stored NCHW, or NHWC when channels_last.
// in: (B, C, H, W) in `in_type`, NCHW (the dataset's order). choices: (B, 3) int32 {dy, dx, flip},
// dy and dx in [0, 2 * crop_padding] (others read as padding, never out of bounds).
// mean, std: (C) floats, or both null for no normalisation. All pointers on the device; out may
// not alias in. Returns cudaErrorInvalidValue before any CUDA call for bad arguments, else the
// launch status (check with CHECK_CUDA). B = 0 launches nothing.
[[nodiscard]] cudaError_t augment_batch(void* out, AugmentOut out_type, bool channels_last, const void* in,
                                        AugmentIn in_type, AugmentDims dims, const int32_t* choices,
                                        int crop_padding, const float* mean, const float* std,
                                        cudaStream_t stream);

// ---- element functions (host and device) -----------------------------------------------

struct AugmentPixel {
  int64_t b, c, y, x;
};

// Output element i of the batch -> its logical (b, c, y, x), for NCHW or NHWC storage.
DP_HD AugmentPixel augment_pixel_of(int64_t i, const AugmentDims& d, bool nhwc) {
  AugmentPixel p;
  if (nhwc) {
    p.c = i % d.channels;
    i /= d.channels;
    p.x = i % d.width;
    i /= d.width;
    p.y = i % d.height;
    p.b = i / d.height;
  } else {
    p.x = i % d.width;
    i /= d.width;
    p.y = i % d.height;
    i /= d.height;
    p.c = i % d.channels;
    p.b = i / d.channels;
  }
  return p;
}

// A raw value scaled as the dataset's get() does.
DP_HD float augment_unit(uint8_t v) { return fp::div(static_cast<float>(v), 255.0f); }
DP_HD float augment_unit(float v) { return v; }

// The f32 value of output pixel p. in: the whole raw batch (B, C, H, W); choice: p.b's row
// {dy, dx, flip}. Mirrors apply_transform: the source of output (y, x) is the padded image's
// (y + dy, x' + dx) with x' = W-1-x when flipped (flip after crop), i.e. the unpadded image's
// (y + dy - P, x' + dx - P).
template <typename In>
DP_HD float augment_value(const In* in, const AugmentDims& d, const AugmentPixel& p, const int32_t* choice,
                          int crop_padding, const float* mean, const float* std) {
  const int64_t sy = p.y + (choice[0] - crop_padding);
  const int64_t sx = (choice[2] != 0 ? d.width - 1 - p.x : p.x) + (choice[1] - crop_padding);
  float v = 0.0f;
  if (sy >= 0 && sy < d.height && sx >= 0 && sx < d.width)
    v = augment_unit(in[((p.b * d.channels + p.c) * d.height + sy) * d.width + sx]);
  if (mean != nullptr) v = fp::div(fp::sub(v, mean[p.c]), std[p.c]);
  return v;
}

}  // namespace dp::kernels::cuda
