// defines: decode_jpeg, JPEG -> 8-bit RGB with libjpeg-turbo through its libjpeg API, with PIL's
// settings (the accurate integer IDCT, fancy upsampling; CMYK read inverted, as PIL assumes Adobe
// files), so a full decode equals PIL's pixel for pixel when both use libjpeg-turbo.
//
// The request may reduce the size (libjpeg's DCT scaling, scale_denom 2, 4, 8) and name a region:
// rows outside it are skipped (entropy-decoded but not transformed: jpeg_skip_scanlines) and
// columns cropped to iMCU boundaries (jpeg_crop_scanline). The region is widened by a margin first,
// because the fancy upsampler treats the edges of a cropped row as image edges; the pixels inside
// the requested region then equal a full decode's (tests/runtime/data/test_image_decode.cpp).
// The whole file is always read to its end, so a truncated file fails whatever region is asked.
//
// Warnings of libjpeg (e.g. "extraneous bytes before marker") are ignored, as PIL ignores them;
// "Premature end of JPEG file" is an error (PIL: "image file is truncated").
#pragma once
#include <cstddef>
#include <string>

#include "runtime/data/image/decoded_image.h"

namespace dp::data::image {

// Pixels added around a requested region (at the decoded scale) before cropping: more than the
// largest iMCU (16 pixels), so no pixel of the region is an edge of the cropped decode.
inline constexpr int kJpegCropMargin = 24;

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, const DecodePlanner& planner);

}  // namespace dp::data::image
