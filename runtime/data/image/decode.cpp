#include "runtime/data/image/decode.h"

#include <cstring>

#include "base/error.h"
#include "runtime/data/image/decode_jpeg.h"
#include "runtime/data/image/decode_png.h"

namespace dp::data::image {

ImageFormat sniff_format(const uint8_t* data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::Jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& name, const DecodePlanner& planner) {
  switch (sniff_format(data, size)) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, name, planner);
    case ImageFormat::Png: {
      DecodedImage img = decode_png(data, size, name);
      if (planner) planner(img.full_height, img.full_width, false);  // PNGs are always whole
      return img;
    }
    case ImageFormat::Unknown: break;
  }
  std::string head;
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) head += fmt::format("{:02x} ", data[i]);
  DP_THROW_USER("{}: not a JPEG or PNG file ({} bytes, starting {}); dptrain reads .jpg/.jpeg and .png images",
                name, size, size ? head.substr(0, head.size() - 1) : std::string("(empty)"));
}

}  // namespace dp::data::image
