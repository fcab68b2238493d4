// defines: the IDX format constants; open_idx and open_fashion_mnist (declared in dataset.h)
// read MNIST-style IDX files, plain or gzip, in idx.cpp.
//
// IDX (Y. LeCun, http://yann.lecun.com/exdb/mnist/): a big-endian header, then raw values.
//   images: magic 0x00000803 (ubyte, 3 dims), n, rows, cols, then n*rows*cols pixels
//           magic 0x00000804 (ubyte, 4 dims), n, d1, d2, d3: colour images, channels last
//           (n, rows, cols, C) when d3 <= 4, else channels first (n, C, rows, cols) when d1 <= 4
//   labels: magic 0x00000801 (ubyte, 1 dim),  n, then n labels
//           magic 0x00000c01 (int32, 1 dim),  n, then n big-endian labels (more than 256 classes)
// Both files are read whole into memory; samples have shape (C, rows, cols), C = 1 for 3 dims.
#pragma once
#include <cstdint>

#include "runtime/data/dataset.h"

namespace dp::data {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
inline constexpr uint32_t kIdxColourImagesMagic = 0x00000804;
inline constexpr uint32_t kIdxIntLabelsMagic = 0x00000c01;
inline constexpr int kIdxNumClasses = 10;  // Fashion-MNIST's

}  // namespace dp::data
