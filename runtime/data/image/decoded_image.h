// defines: the types of image decoding: Region, DecodeRequest and the DecodePlanner that chooses
// it once the image's size is known, DecodedImage (which part of the image, at which scale, a
// decode holds), and kMaxImagePixels. Shared by the decoders (decode_jpeg.h, decode_png.h) and
// decode_image (decode.h), which picks one.
#pragma once
#include <cstdint>
#include <functional>
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

// Images above this many pixels (decoded) are refused, as PIL refuses decompression bombs.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

}  // namespace dp::data::image
