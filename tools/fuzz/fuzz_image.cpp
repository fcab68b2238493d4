// defines: the libFuzzer target of an image sample (runtime/data/image/sample.h): the bytes of one
// image_folder file or tar shard member, JPEG or PNG, decoded (reduced and in part for a JPEG when
// the plan allows), cropped and resized as the loader does. The input's first byte picks the
// transform (bit 0: RandomResizedCrop or Resize + CenterCrop, bit 1: reduced JPEG decoding, bits
// 2-7: the output side, 1 to 64), its second the crop stream's seed; the rest is the file. Making
// the sample may throw UserError (one line naming the file), never crash, read past the bytes,
// or write past the sample.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/rng.h"
#include "runtime/data/image/sample.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  dp::data::image::ImageCrop crop;
  crop.kind = data[0] & 1 ? dp::data::image::ImageCrop::Kind::RandomResizedCrop
                          : dp::data::image::ImageCrop::Kind::ResizeCenterCrop;
  crop.decode_scaled = (data[0] & 2) != 0;
  crop.size = 1 + (data[0] >> 2);
  crop.resize = crop.size + crop.size / 7;  // torchvision's 224 of 256 and about as much margin
  dp::Rng rng(data[1], 7);
  std::vector<uint8_t> out(3 * static_cast<size_t>(crop.size) * crop.size);
  try {
    dp::data::image::make_sample(data + 2, size - 2, "fuzz-image", crop, &rng, out.data());
  } catch (const dp::UserError&) {
  }
  return 0;
}
