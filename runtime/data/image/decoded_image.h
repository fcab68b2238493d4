// defines: the types of image decoding: Region, DecodeRequest and the DecodePlanner that chooses
// it once the image's size is known, DecodedImage (which part of the image, at which scale, a
// decode holds), and kMaxImagePixels. Shared by the decoders (decode_jpeg.h, decode_png.h) and
// decode_image (decode.h), which picks one.
#pragma once
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

// Images of more pixels than this (their full size, whatever part or scale is decoded) are
// refused, as PIL refuses them at open: twice its Image.MAX_IMAGE_PIXELS (89,478,485), beyond which
// it raises DecompressionBombError. A 472-byte JPEG can claim 1 G pixels: its decoded crop and the
// resize over it took seconds a sample and a GiB (fuzz_image).
inline constexpr int64_t kMaxImagePixels = 2 * int64_t{89'478'485};

// The error text of an image of width x height beyond kMaxImagePixels, "" within it.
inline std::string pixel_limit_error(int64_t width, int64_t height) {
  if (width * height <= kMaxImagePixels) return "";
  return "image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels is larger than the limit of " +
         std::to_string(kMaxImagePixels) + " (PIL's decompression-bomb limit)";
}

}  // namespace dp::data::image
