// defines: the IDX format constants; open_idx and open_fashion_mnist (declared in dataset.h)
// read MNIST-style IDX files, plain or gzip, in idx.cpp.
//
// IDX (Y. LeCun, http://yann.lecun.com/exdb/mnist/): a big-endian header, then raw bytes.
//   images: magic 0x00000803 (ubyte, 3 dims), n, rows, cols, then n*rows*cols pixels
//   labels: magic 0x00000801 (ubyte, 1 dim),  n,             then n labels in 0..9
// Both files are read whole into memory; samples have shape (1, rows, cols).
#pragma once
#include <cstdint>

#include "runtime/data/dataset.h"

namespace dp::data {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
inline constexpr int kIdxNumClasses = 10;

}  // namespace dp::data
