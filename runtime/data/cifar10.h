// defines: the CIFAR-10 record layout. open_cifar10 (declared in dataset.h, defined in
// cifar10.cpp) reads the binary version (https://www.cs.toronto.edu/~kriz/cifar.html).
//
// Each file is a sequence of 3073-byte records: 1 label byte (0..9), then 3072 pixel bytes in
// (C, H, W) = (3, 32, 32) order: the red plane, then green, then blue, each row-major.
// train = data_batch_1.bin .. data_batch_5.bin (50000 records); test = test_batch.bin (10000).
#pragma once
#include <cstdint>

#include "runtime/data/dataset.h"

namespace dp::data {

inline constexpr int64_t kCifarRecordBytes = 1 + 3 * 32 * 32;
inline constexpr int kCifarNumClasses = 10;

}  // namespace dp::data
