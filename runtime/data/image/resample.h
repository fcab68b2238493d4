// defines: AxisPlan and resample_rgb, Pillow's bilinear resize with antialias (ImagingResample with
// the BILINEAR filter, src/libImaging/Resample.c) on 8-bit RGB, reproduced bit for bit, computing
// only the output pixels asked for.
//
// Pillow resizes in two passes, each output pixel a weighted sum of the
// input pixels under a triangle filter widened by the scale factor (so downscaling averages, the
// "antialias"); weights are normalised, turned into 22-bit fixed point, and every pass rounds to
// u8. The order of the passes changes the rounding: Pillow 13 runs the vertical pass first when
// the height shrinks by more than twice as many pixels as the width (pillow_vertical_first),
// Pillow 12 and older always horizontally first (their results differ from 13's by at most 1 in
// some pixels); we follow Pillow 13. torchvision's Resize / RandomResizedCrop on a PIL image call exactly this, so equal
// coefficients and equal arithmetic give equal bytes.
//
// An axis plan says which part of the source axis the resize reads and which outputs are wanted:
// `origin` is where the resized region's clamp window starts in the image (PIL's crop: the
// region is a picture of its own, taps outside it are dropped), in0/in1 the resize box inside
// that window (floats, as Pillow's box), out_size the full output length and
// [out_first, out_first + out_count) the outputs kept (a centre crop of the resized image needs
// no other; the coefficients of output j are those of the full resize).
#pragma once
#include <cstdint>
#include <vector>

namespace dp::data::image {

struct AxisPlan {
  int origin = 0;      // first source pixel of the window
  int in_size = 0;     // window length (taps are clamped to [0, in_size) of the window)
  float in0 = 0, in1 = 0;  // the resize box in window coordinates (Pillow's box[0], box[2])
  int out_size = 0;    // output length of the full resize
  int out_first = 0, out_count = 0;  // the outputs computed
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for outputs [out_first, out_first + count):
// per output a first tap (window coordinates) and `ksize` fixed-point weights (zeros past its taps).
struct AxisCoeffs {
  int ksize = 0;
  std::vector<int> first, taps;    // (count): first tap, number of taps
  std::vector<int32_t> weights;    // (count, ksize)
};
AxisCoeffs axis_coeffs(const AxisPlan& p);

// Pillow 13's pass order for a resize of window x.in_size x y.in_size to x.out_size x y.out_size.
bool pillow_vertical_first(const AxisPlan& x, const AxisPlan& y);

// src: (H, W, 3) u8 RGB rows of `src_stride` bytes. Writes out (3, ny.out_count, nx.out_count) u8,
// channel-planar (CHW, the tensor layout). nx, ny: the plans of x and y in src's coordinates
// (origin + window inside [0, W) and [0, H)). An axis whose plan is the identity (same size, box =
// window) is copied, as Pillow skips that pass.
void resample_rgb(const uint8_t* src, int height, int width, int src_stride, const AxisPlan& nx, const AxisPlan& ny,
                  uint8_t* out);

}  // namespace dp::data::image
