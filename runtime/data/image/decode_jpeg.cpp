#include "runtime/data/image/decode_jpeg.h"

// clang-format off: jpeglib.h needs <cstdio> first, jerror.h after it.
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>

#include "base/error.h"

namespace dp::data::image {
namespace {

// libjpeg reports errors through error_exit, which must not return: we longjmp back to the
// setjmp in decode_into (libjpeg is C, so a C++ exception must not unwind through it).
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// level -1 is a warning: a truncated file is an error, the others are ignored (as PIL does).
void on_message(j_common_ptr c, int level) {
  if (level == -1 && c->err->msg_code == JWRN_JPEG_EOF) on_error(c);
}

// PIL's CMYK -> RGB (Convert.c cmyk2rgb) on the inverted values libjpeg returns for Adobe CMYK
// (PIL reads CMYK JPEGs as "CMYK;I"): c = 255 - raw, and r = nk - c * nk / 255 with nk = 255 - k
// (MULDIV255's rounding).
inline uint8_t muldiv255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}
void cmyk_row_to_rgb(const uint8_t* in, int n, uint8_t* out) {
  for (int i = 0; i < n; ++i, in += 4, out += 3) {
    const int nk = in[3];  // 255 - (255 - raw k)
    for (int ch = 0; ch < 3; ++ch) {
      const int v = nk - muldiv255(255 - in[ch], nk);
      out[ch] = static_cast<uint8_t>(v < 0 ? 0 : v);
    }
  }
}

// The request, clamped to the reduced image, widened by the crop margin.
Region widened(const DecodeRequest& r, int height, int width) {
  if (r.region.empty()) return Region{0, 0, width, height};
  return Region{std::max(0, r.region.x0 - kJpegCropMargin), std::max(0, r.region.y0 - kJpegCropMargin),
                std::min(width, r.region.x1 + kJpegCropMargin), std::min(height, r.region.y1 + kJpegCropMargin)};
}

// Reads the rows [want.y0, want.y1) of the crop into out->rgb, skipping the others.
void read_rows(jpeg_decompress_struct* ci, const Region& want, int components, uint8_t* scratch,
               DecodedImage* out) {
  jpeg_skip_scanlines(ci, static_cast<JDIMENSION>(want.y0));
  const int w = out->width;
  for (int y = 0; y < out->height; ++y) {
    uint8_t* dst = out->rgb.data() + static_cast<size_t>(y) * w * 3;
    JSAMPROW row = components == 3 ? dst : scratch;
    jpeg_read_scanlines(ci, &row, 1);  // a memory source never suspends: always one row
    if (components == 1)
      for (int x = 0; x < w; ++x) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = scratch[x];
    else if (components == 4)
      cmyk_row_to_rgb(scratch, w, dst);
  }
  // The rest is entropy-decoded (skipped), so that truncation is found whatever the region.
  if (ci->output_scanline < ci->output_height) jpeg_skip_scanlines(ci, ci->output_height - ci->output_scanline);
}

// The decode, between setjmp and the end: false with err->message on a libjpeg error, or with no
// message and the full size in `out` for an image beyond kMaxImagePixels. Only
// trivially destructible locals live here (a longjmp skips destructors); out and scratch belong to
// the caller.
bool decode_into(jpeg_decompress_struct* ci, JpegError* err, const uint8_t* data, size_t size,
                 const DecodePlanner* planner, DecodedImage* out, std::vector<uint8_t>* scratch) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(ci, data, static_cast<unsigned long>(size));
  jpeg_read_header(ci, TRUE);
  if (static_cast<int64_t>(ci->image_width) * ci->image_height > kMaxImagePixels) {  // before any allocation
    out->full_height = static_cast<int>(ci->image_height), out->full_width = static_cast<int>(ci->image_width);
    return false;  // with no libjpeg message: decode_jpeg names the limit
  }
  const bool cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
  const bool gray = ci->jpeg_color_space == JCS_GRAYSCALE;
  ci->out_color_space = cmyk ? JCS_CMYK : (gray ? JCS_GRAYSCALE : JCS_RGB);
  ci->dct_method = JDCT_ISLOW;
  ci->do_fancy_upsampling = TRUE;
  DecodeRequest req;
  if (planner && *planner) req = (*planner)(static_cast<int>(ci->image_height), static_cast<int>(ci->image_width), true);
  ci->scale_num = 1;
  ci->scale_denom = static_cast<unsigned>(req.scale_denom);
  jpeg_start_decompress(ci);
  out->full_height = static_cast<int>(ci->output_height);
  out->full_width = static_cast<int>(ci->output_width);
  Region want = widened(req, out->full_height, out->full_width);
  JDIMENSION x0 = static_cast<JDIMENSION>(want.x0), w = static_cast<JDIMENSION>(want.x1 - want.x0);
  if (w < ci->output_width) jpeg_crop_scanline(ci, &x0, &w);  // moves x0 left, widens w to iMCUs
  out->x0 = static_cast<int>(x0), out->width = static_cast<int>(w);
  out->y0 = want.y0, out->height = want.y1 - want.y0;
  const int components = ci->output_components;
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  scratch->resize(static_cast<size_t>(ci->output_width) * components);
  read_rows(ci, want, components, scratch->data(), out);
  jpeg_finish_decompress(ci);
  return true;
}

}  // namespace

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, const DecodePlanner& planner) {
  jpeg_decompress_struct ci;
  JpegError err;
  ci.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  err.mgr.emit_message = on_message;
  err.message[0] = '\0';
  jpeg_create_decompress(&ci);
  struct Destroy {  // also when the planner throws
    jpeg_decompress_struct* ci;
    ~Destroy() { jpeg_destroy_decompress(ci); }
  } destroy{&ci};
  DecodedImage out;
  std::vector<uint8_t> scratch;
  const bool ok = decode_into(&ci, &err, data, size, &planner, &out, &scratch);
  if (!ok)
    DP_THROW_USER("{}: cannot decode this JPEG: {}", name,
                  err.message[0] != '\0' ? std::string(err.message) : pixel_limit_error(out.full_width, out.full_height));
  return out;
}

}  // namespace dp::data::image
