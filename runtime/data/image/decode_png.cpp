#include "runtime/data/image/decode_png.h"

#include <spng.h>

#include <memory>

#include "base/error.h"

namespace dp::data::image {
namespace {

struct CtxFree {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};

void check(int rc, const std::string& name, const char* what) {
  if (rc != 0) DP_THROW_USER("{}: cannot decode this PNG ({}): {}", name, what, spng_strerror(rc));
}

}  // namespace

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<spng_ctx, CtxFree> ctx(spng_ctx_new(0));
  DP_CHECK(ctx != nullptr, "spng_ctx_new failed for {}", name);
  check(spng_set_png_buffer(ctx.get(), data, size), name, "reading");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), name, "header");
  if (const std::string e = pixel_limit_error(ihdr.width, ihdr.height); !e.empty()) DP_THROW_USER("{}: {}", name, e);
  size_t bytes = 0;
  check(spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &bytes), name, "size");
  DecodedImage out;
  out.full_height = out.height = static_cast<int>(ihdr.height);
  out.full_width = out.width = static_cast<int>(ihdr.width);
  out.rgb.resize(bytes);
  check(spng_decode_image(ctx.get(), out.rgb.data(), bytes, SPNG_FMT_RGB8, 0), name, "pixels");
  return out;
}

}  // namespace dp::data::image
