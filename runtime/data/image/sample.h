// defines: ImageCrop (the geometric transform of an image sample: torchvision's
// RandomResizedCrop(size, scale, ratio), or Resize(resize) + CenterCrop(size)) and make_sample,
// encoded image bytes -> one (3, size, size) u8 sample: the plan from the image's size
// (runtime/data/image/geometry.h), a decode of what the plan reads (reduced and partial for JPEGs
// when allowed), the resize (runtime/data/image/resample.h).
//
// The result equals torchvision's transform applied to PIL's decoded image: bit for bit with
// decode_scaled = false (tests/oracle/test_image_torchvision.py); with decode_scaled, JPEGs large
// enough are decoded at 1/2, 1/4 or 1/8 of their size first, as PIL's draft mode does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/rng.h"
#include "runtime/data/image/geometry.h"

namespace dp::data::image {

struct ImageCrop {
  enum class Kind { ResizeCenterCrop, RandomResizedCrop };
  Kind kind = Kind::ResizeCenterCrop;
  int size = 224;                      // output side (data.image_size)
  int resize = 256;                    // ResizeCenterCrop: the shorter side before the crop
  double scale_lo = 0.08, scale_hi = 1.0;                  // RandomResizedCrop's scale
  double ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;       // and ratio (torchvision's defaults)
  bool decode_scaled = true;           // allow reduced-size JPEG decoding
};

// Writes (3, crop.size, crop.size) u8 (RGB planes) to out. rng: the sample's crop stream (used by
// RandomResizedCrop only). box: when given, RandomResizedCrop uses it instead of drawing one (for
// tests); its size must fit the image. Throws UserError naming `name` when the image cannot be
// decoded.
void make_sample(const uint8_t* data, size_t size, const std::string& name, const ImageCrop& crop, Rng* rng,
                 uint8_t* out, const CropBox* box = nullptr);

}  // namespace dp::data::image
