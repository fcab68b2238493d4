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
#include <functional>
#include <string>
#include <vector>

namespace dp::data::image {

// A region [x0, x1) x [y0, y1) of the decoded image; empty (x1 <= x0) means all of it.
struct Region {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};

struct DecodeRequest {
  int scale_denom = 1;  // 1, 2, 4 or 8 (JPEG only; PNGs are always decoded whole)
  Region region;        // in the coordinates of the reduced image; at least this much is decoded
};

// Chooses the request once the image's full size is known: (height, width, jpeg: can be reduced
// and cropped).
using DecodePlanner = std::function<DecodeRequest(int height, int width, bool jpeg)>;

struct DecodedImage {
  int full_height = 0, full_width = 0;  // the whole image at the decoded scale
  int x0 = 0, y0 = 0;                   // where rgb's first pixel lies in it
  int height = 0, width = 0;            // rgb's size
  std::vector<uint8_t> rgb;             // (height, width, 3)
};

enum class ImageFormat { Unknown, Jpeg, Png };
// From the first bytes (JPEG: FF D8 FF; PNG: 89 'P' 'N' 'G' 0D 0A 1A 0A).
ImageFormat sniff_format(const uint8_t* data, size_t size);

// planner: null decodes the whole image at full size.
DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& name,
                          const DecodePlanner& planner = nullptr);

// Images above this many pixels (decoded) are refused, as PIL refuses decompression bombs.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

}  // namespace dp::data::image
