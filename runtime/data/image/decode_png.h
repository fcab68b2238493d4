// defines: decode_png, PNG -> 8-bit RGB with libspng: every colour type and bit depth (palette,
// grayscale, with or without alpha, 1..16 bits); alpha and tRNS are dropped (PIL's convert("RGB")),
// 16-bit samples become their high byte (PIL's "RGB;16B" for colour PNGs; PIL clips 16-bit
// grayscale instead, a known PIL quirk that we do not reproduce), no gamma applied (PIL applies
// none). Always decoded whole.
#pragma once
#include <cstddef>
#include <string>

#include "runtime/data/image/decoded_image.h"

namespace dp::data::image {

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& name);

}  // namespace dp::data::image
