#include "runtime/data/image/sample.h"

#include "base/error.h"
#include "runtime/data/image/decode.h"

namespace dp::data::image {
namespace {

AxisPlan shifted(AxisPlan p, int by) {
  p.origin -= by;
  return p;
}

}  // namespace

void make_sample(const uint8_t* data, size_t size, const std::string& name, const ImageCrop& crop, Rng* rng,
                 uint8_t* out, const CropBox* box) {
  SamplePlan plan;
  // Called with the full size once the header is read: the plan, and the region it reads.
  const DecodePlanner planner = [&](int height, int width, bool jpeg) {
    const int max_denom = jpeg && crop.decode_scaled ? 8 : 1;
    if (crop.kind == ImageCrop::Kind::RandomResizedCrop) {
      CropBox b = box ? *box
                      : random_resized_crop_box(height, width, crop.scale_lo, crop.scale_hi, crop.ratio_lo,
                                                crop.ratio_hi, *rng);
      plan = plan_resized_crop(height, width, b, crop.size, max_denom);
    } else {
      plan = plan_resize_center_crop(height, width, crop.resize, crop.size, max_denom);
    }
    DecodeRequest req;
    req.scale_denom = plan.scale_denom;
    const auto [x0, x1] = source_span(plan.x);
    const auto [y0, y1] = source_span(plan.y);
    req.region = Region{x0, y0, x1, y1};
    return req;
  };
  const DecodedImage img = decode_image(data, size, name, planner);
  resample_rgb(img.rgb.data(), img.height, img.width, img.width * 3, shifted(plan.x, img.x0), shifted(plan.y, img.y0),
               out);
}

}  // namespace dp::data::image
