// defines: NpyArray and read_npy (numpy's .npy format, versions 1 to 3), and open_npy: a pair of
// arrays x (N, ...) and y (N) as a data set, for anything that is not images.
//
// .npy (numpy.lib.format): "\x93NUMPY", major, minor, a little-endian header length (u16 for
// version 1, u32 for 2 and 3), then a Python dict literal {'descr': '<f4', 'fortran_order':
// False, 'shape': (N, ...), } and the raw C-order data.
//
// x: u8 (a data set of bytes: values / 255, as images), f32 or f16 (values as they are, f16
// widened; every one finite, else a UserError naming the first sample that is not); any sample shape (x.shape[1:]; a 1-dim x gives samples of shape [1]). y: any integer
// type, values >= 0; the class count is the largest label + 1 (the caller takes the largest over
// train and val). Every malformed input is a UserError naming the file.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace dp::data {

struct NpyArray {
  std::string descr;           // e.g. "<f4", "|u1"
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<uint8_t> data;   // raw little-endian values, C order
};

NpyArray read_npy(const std::string& path);

// x_path, y_path: the two arrays of one split; num_classes 0: from y.
std::unique_ptr<Dataset> open_npy(const std::string& x_path, const std::string& y_path, int num_classes = 0);

}  // namespace dp::data
