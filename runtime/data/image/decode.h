// defines: decode_image, encoded image bytes (JPEG or PNG, told apart by their first bytes) ->
// 8-bit RGB, as PIL's Image.open(f).convert("RGB") gives them (what torchvision's ImageFolder
// loads): grayscale replicated, CMYK converted with PIL's formula, alpha dropped, 16-bit samples
// reduced to their high byte. JPEGs may be decoded at reduced size and only in part
// (runtime/data/image/decode_jpeg.h); a DecodedImage says which part of which size it holds.
//
// Every failure (not an image, corrupt or truncated data) is a UserError naming `name` (the file,
// or shard:member) and what the decoder said.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/data/image/decoded_image.h"

namespace dp::data::image {

enum class ImageFormat { Unknown, Jpeg, Png };
// From the first bytes (JPEG: FF D8 FF; PNG: 89 'P' 'N' 'G' 0D 0A 1A 0A).
ImageFormat sniff_format(const uint8_t* data, size_t size);

// planner: null decodes the whole image at full size.
DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& name,
                          const DecodePlanner& planner = nullptr);

}  // namespace dp::data::image
